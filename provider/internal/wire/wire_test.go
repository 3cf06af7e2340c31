package wire

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

func readAll(t *testing.T, in string) [][2]string {
	t.Helper()
	r := NewSSEReader(bufio.NewReaderSize(strings.NewReader(in), 16))
	var out [][2]string
	for {
		ev, data, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, [2]string{string(ev), string(data)})
	}
}

func TestSSEReader(t *testing.T) {
	long := strings.Repeat("x", 100000)
	got := readAll(t, ": comment\r\nevent: a\r\ndata: 1\r\ndata:2\r\nid: 7\r\nretry: 10\r\n\r\n\n\ndata: "+long+"\n\nevent: ignored-no-data\n\ndata: last")
	want := [][2]string{{"a", "1\n2"}, {"", long}, {"", "last"}}
	if len(got) != len(want) {
		t.Fatalf("got %d events", len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: %q", i, got[i][0])
		}
	}
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("y", 50000)
	r := NewLineReader(bufio.NewReaderSize(strings.NewReader("a\r\n"+long+"\nlast"), 16))
	var lines []string
	for {
		l, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(l))
	}
	if len(lines) != 3 || lines[0] != "a" || lines[1] != long || lines[2] != "last" {
		t.Fatalf("%d lines", len(lines))
	}
}

func TestRedactAndErrorMessage(t *testing.T) {
	if got := Redact("bad key sk-abcdef", "sk-abcdef"); got != "bad key [REDACTED]" {
		t.Fatal(got)
	}
	for body, want := range map[string]string{
		`{"error":{"message":"m1","type":"t1"}}`:                "m1/t1",
		`{"type":"error","error":{"type":"t2","message":"m2"}}`: "m2/t2",
		`{"error":{"code":400,"message":"m3","status":"S"}}`:    "m3/S",
		`{"error":"m4"}`:   "m4/",
		`not json`:         "/",
		`{"message":"m5"}`: "m5/",
	} {
		m, typ := DefaultErrorMessage([]byte(body))
		if m+"/"+typ != want {
			t.Errorf("%s: %s/%s", body, m, typ)
		}
	}
}

func TestBodyOptions(t *testing.T) {
	b := NewBody()
	b.Value("model", "m")
	b.Value("stream", true)
	b.Options(map[string]any{"z": 1, "a": "x<y", "model": "override", "stream": false, "messages": 1}, "messages")
	out, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"model":"m","stream":true,"a":"x<y","z":1}` {
		t.Fatal(string(out))
	}
}

func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("event: a\ndata: 1\n\ndata: 2\r\n\r\n"))
	f.Add([]byte(": c\ndata\ndata:\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewSSEReader(bufio.NewReaderSize(strings.NewReader(string(in)), 16))
		for i := 0; i < 10000; i++ {
			if _, _, err := r.Next(); err != nil {
				return
			}
		}
	})
}

func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nb\r\nc"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewLineReader(bufio.NewReaderSize(strings.NewReader(string(in)), 16))
		for i := 0; i < 100000; i++ {
			if _, err := r.Next(); err != nil {
				return
			}
		}
	})
}
