package agui

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"
)

// Frames the Writer produces read back, through ReadSSE and ReadNDJSON, as
// the wire form of the events written (check 45: `data: <json>\n\n`, no
// [DONE]).
func TestWriterReadRoundTrip(t *testing.T) {
	var cases []refEventCase
	loadJSON(t, "ref_events.json", &cases)
	events := make([]Event, len(cases))
	for i, c := range cases {
		if err := events[i].UnmarshalJSON([]byte(c.In)); err != nil {
			t.Fatal(err)
		}
	}
	for _, format := range []Format{SSE, NDJSON} {
		t.Run(string(format), func(t *testing.T) {
			var buf bytes.Buffer
			w := NewWriter(&buf, WriterOptions{Format: format, Profile: ProfileTanStack})
			for i := range events {
				id := ""
				if i%2 == 0 {
					id = fmt.Sprint(i)
				}
				if err := w.WriteID(id, &events[i]); err != nil {
					t.Fatal(err)
				}
			}
			out := buf.String()
			if strings.Contains(out, "[DONE]") {
				t.Error("[DONE] written")
			}
			if format == SSE && !strings.HasPrefix(out, "id: 0\ndata: {") {
				t.Errorf("SSE framing: %.40q", out)
			}
			read := ReadSSE
			if format == NDJSON {
				read = ReadNDJSON
			}
			i := 0
			for fr, err := range read(strings.NewReader(out)) {
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprint(i); (i%2 == 0) != (fr.ID == want) {
					t.Errorf("frame %d id %q", i, fr.ID)
				}
				if !jsonEqual(t, fr.Data, []byte(cases[i].Wire)) {
					t.Errorf("frame %d\n got %s\nwant %s", i, fr.Data, cases[i].Wire)
				}
				i++
			}
			if i != len(events) {
				t.Errorf("read %d frames, want %d", i, len(events))
			}
			// Cut the stream inside the last frame: the reader reports it.
			if err := lastErr(read(strings.NewReader(out[:len(out)-3]))); !errors.Is(err, ErrTruncated) {
				t.Errorf("truncated stream: err = %v, want ErrTruncated", err)
			}
		})
	}
}

func lastErr(seq iter.Seq2[Frame, error]) error {
	var last error
	for _, err := range seq {
		last = err
	}
	return last
}

// An Emit writer hands over each event with its wire form, the bytes a
// byte writer would frame, and allocates nothing per event: the event and
// the bytes are the writer's, reused.
func TestWriterEmitPassesWireForm(t *testing.T) {
	var cases []refEventCase
	loadJSON(t, "ref_events.json", &cases)
	var got, want [][]byte
	w := NewWriter(nil, WriterOptions{Profile: ProfileTanStack, Emit: func(e *Event, wire []byte) error {
		if !bytes.Equal(wire, AppendWire(nil, e)) {
			t.Errorf("%s: wire %s, event encodes as %s", e.Type, wire, AppendWire(nil, e))
		}
		got = append(got, bytes.Clone(wire))
		return nil
	}})
	for _, c := range cases {
		var e Event
		if err := e.UnmarshalJSON([]byte(c.In)); err != nil {
			t.Fatal(err)
		}
		want = append(want, AppendWire(nil, &e))
		if err := w.Write(&e); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d events emitted, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("event %d: emitted %s, want %s", i, got[i], want[i])
		}
	}

	var n int
	w = NewWriter(nil, WriterOptions{Profile: ProfileTanStack, Emit: func(e *Event, wire []byte) error {
		n += len(wire)
		return nil
	}})
	delta := Event{Type: TextMessageContent, MessageID: "m1", Delta: "hello", Timestamp: 1}
	if err := w.Write(&delta); err != nil { // the writer's copy and buffer, once
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if err := w.Write(&delta); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("%v allocations per emitted event, want 0", allocs)
	}
}
