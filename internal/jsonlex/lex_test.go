package jsonlex

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// decodeAny builds the value encoding/json would build with UseNumber,
// using only the Scanner's API, so the two can be compared.
func decodeAny(s *Scanner, depth int) (any, error) {
	if depth > MaxDepth {
		return nil, ErrMaxDepth
	}
	switch c := s.Peek(); {
	case c == '{':
		s.pos++
		m := map[string]any{}
		for first := true; ; first = false {
			k, ok, err := s.NextKey(first)
			if err != nil {
				return nil, err
			}
			if !ok {
				return m, nil
			}
			key := string(k)
			v, err := decodeAny(s, depth+1)
			if err != nil {
				return nil, err
			}
			m[key] = v
		}
	case c == '[':
		s.pos++
		a := []any{}
		for first := true; ; first = false {
			ok, err := s.NextElem(first)
			if err != nil {
				return nil, err
			}
			if !ok {
				return a, nil
			}
			v, err := decodeAny(s, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
	case c == '"':
		b, err := s.String(nil)
		return string(b), err
	case c == 't' || c == 'f':
		return s.Bool()
	case c == 'n':
		if s.IsNull() {
			return nil, nil
		}
		return nil, s.errf("invalid literal")
	default:
		b, err := s.Number()
		return json.Number(b), err
	}
}

// decodeDoc decodes a whole document: one value and nothing after it.
func decodeDoc(data []byte) (any, error) {
	s := New(data)
	v, err := decodeAny(s, 0)
	if err != nil {
		return nil, err
	}
	if !s.AtEOF() {
		return nil, s.errf("trailing data")
	}
	return v, nil
}

// oracle decodes data with encoding/json (numbers kept as text).
func oracle(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if !json.Valid(data) { // rejects trailing data, which Decode leaves unread
		return nil, errors.New("invalid")
	}
	return v, nil
}

func TestScannerMatchesEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`null`, `true`, `false`, ` 0 `, `-0`, `1.5e10`, `-12.25E-3`, `1E+2`, `123456789012345678901234567890`,
		`""`, `"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u0041\u00e9\u20ac"`, `"\ud83d\ude00"`,
		`"\ud800"`, `"\udc00"`, `"\ud800x"`, `"\ud800\u0041"`, `"\ud800\ud800\udc00"`, `"\udc00\ud800"`,
		"\"caf\xc3\xa9\"", "\"bad \xff byte\"", "\"bad \xe2\x82 then \\n\"", "\"\xed\xa0\x80\"",
		`{}`, `[]`, `[1,"a",null,true,{"k":[]}]`, `{"a":1,"a":2}`, `{"\u006b":"v","k2":{"x":[1,2]}}`,
		" \t\r\n{ \"a\" : [ 1 , 2 ] } \n",
		// Invalid documents: both must reject them.
		``, ` `, `nul`, `tru`, `True`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `NaN`,
		`"`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\x01b\"", "\"tab\there\"",
		`{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{1:2}`, `{"a":1 "b":2}`, `[`, `[1,]`, `[,1]`, `[1 2]`,
		`{} {}`, `[] x`, `"a" "b"`, `]`, `}`,
	} {
		want, werr := oracle([]byte(in))
		got, gerr := decodeDoc([]byte(in))
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%q: encoding/json err=%v, jsonlex err=%v", in, werr, gerr)
			continue
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%q: jsonlex %#v, encoding/json %#v", in, got, want)
		}
	}
}

func TestSyntaxErrorOffsets(t *testing.T) {
	for _, tc := range []struct {
		in     string
		offset int
		msg    string
	}{
		{`{"a" 1}`, 5, `want ':'`},
		{`[1,2`, 4, "end of input in array"},
		{`{"a":1`, 6, "end of input in object"},
		{`"a\qb"`, 3, `invalid escape \q`},
		{"\"a\nb\"", 2, "control character"},
		{`[1 x]`, 3, `unexpected 'x' in array`},
		{`-x`, 1, "invalid number"},
	} {
		_, err := decodeDoc([]byte(tc.in))
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: error %v, want a *SyntaxError", tc.in, err)
			continue
		}
		if se.Offset != tc.offset || !strings.Contains(se.Msg, tc.msg) {
			t.Errorf("%q: offset %d %q, want offset %d containing %q", tc.in, se.Offset, se.Msg, tc.offset, tc.msg)
		}
	}
}

func TestRawReturnsExactValueBytes(t *testing.T) {
	in := []byte(` {"a": [1, {"b": "\u0041"}], "c": "x"} , "next"`)
	s := New(in)
	raw, err := s.Raw()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a": [1, {"b": "\u0041"}], "c": "x"}`; string(raw) != want {
		t.Fatalf("Raw = %s, want %s", raw, want)
	}
	if err := s.Expect(','); err != nil {
		t.Fatal(err)
	}
	b, err := s.String(nil)
	if err != nil || string(b) != "next" || !s.AtEOF() {
		t.Fatalf("after Raw: %q %v eof=%v", b, err, s.AtEOF())
	}
}

func TestDepthLimit(t *testing.T) {
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := New([]byte(ok)).Raw(); err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
	deep := strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2)
	_, err := New([]byte(deep)).Raw()
	var se *SyntaxError
	if !errors.As(err, &se) || se.Msg != ErrMaxDepth.Error() {
		t.Fatalf("depth %d: error %v, want the depth limit", MaxDepth+2, err)
	}
}

func TestStringAliasesOnlyWithoutEscapes(t *testing.T) {
	in := []byte(`"plain"`)
	b, err := New(in).String(nil)
	if err != nil || &b[0] != &in[1] {
		t.Fatalf("an unescaped string should alias the input (err %v)", err)
	}
	buf := make([]byte, 0, 16)
	b, err = New([]byte(`"a\nb"`)).String(buf)
	if err != nil || string(b) != "a\nb" || &b[0] != &buf[:1][0] {
		t.Fatalf("an escaped string should be built in buf: %q %v", b, err)
	}
}

func TestIntAndBool(t *testing.T) {
	for in, want := range map[string]int64{`42`: 42, `-7`: -7, `3.9`: 3, `1e3`: 1000, `9223372036854775807`: 1<<63 - 1} {
		got, err := New([]byte(in)).Int()
		if err != nil || got != want {
			t.Errorf("Int(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := New([]byte(`1e400`)).Int(); err == nil {
		t.Error("Int(1e400): want an out-of-range error")
	}
	if _, err := New([]byte(`"1"`)).Int(); err == nil {
		t.Error(`Int("1"): want an error`)
	}
	if v, err := New([]byte(` true`)).Bool(); err != nil || !v {
		t.Errorf("Bool(true) = %v, %v", v, err)
	}
	if _, err := New([]byte(`fals`)).Bool(); err == nil {
		t.Error("Bool(fals): want an error")
	}
}

func FuzzScannerAgainstEncodingJSON(f *testing.F) {
	for _, seed := range []string{
		`{"type":"TEXT_MESSAGE_CONTENT","delta":"h\u00e9llo \ud83d\ude00","n":[1,-2.5e3,true,null]}`,
		`"\ud800\ud800\udc00"`, "\"\xff\"", `[[[]]]`, `{"a":{"b":{}}}`, `01`, `"\u12`, ` 1 `,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gerr := decodeDoc(data)
		if errors.Is(gerr, ErrMaxDepth) {
			return // encoding/json allows deeper nesting than MaxDepth
		}
		want, werr := oracle(data)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: encoding/json err=%v, jsonlex err=%v", data, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: jsonlex %#v, encoding/json %#v", data, got, want)
		}
		// Raw validates exactly what Valid accepts (depth permitting) and
		// returns the value without surrounding space.
		s := New(data)
		raw, rerr := s.Raw()
		if rerr == nil && s.AtEOF() {
			if werr != nil {
				t.Fatalf("%q: Raw accepted what encoding/json rejects: %v", data, werr)
			}
			if !bytes.Equal(raw, bytes.TrimSpace(data)) {
				t.Fatalf("%q: Raw = %q", data, raw)
			}
		} else if werr == nil {
			var se *SyntaxError
			if !errors.As(rerr, &se) || se.Msg != ErrMaxDepth.Error() {
				t.Fatalf("%q: Raw rejected valid JSON: %v", data, rerr)
			}
		}
	})
}
