package wire

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/goai-sdk/goai/internal/jsonlex"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// Marshal encodes v without HTML escaping, as providers document bodies.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Body builds a JSON object with keys in insertion order.
type Body struct {
	b    []byte
	keys []string
	err  error
}

// NewBody starts an object.
func NewBody() *Body { return &Body{b: append(make([]byte, 0, 1024), '{')} }

// Has reports whether key was written.
func (o *Body) Has(key string) bool { return slices.Contains(o.keys, key) }

// Raw writes key with raw JSON.
func (o *Body) Raw(key string, raw []byte) {
	if len(o.keys) > 0 {
		o.b = append(o.b, ',')
	}
	o.keys = append(o.keys, key)
	k, _ := Marshal(key)
	o.b = append(o.b, k...)
	o.b = append(o.b, ':')
	o.b = append(o.b, raw...)
}

// Value writes key with v encoded.
func (o *Body) Value(key string, v any) {
	raw, err := Marshal(v)
	if err != nil {
		if o.err == nil {
			o.err = err
		}
		return
	}
	o.Raw(key, raw)
}

// Options spreads provider-native model options, sorted by key, skipping
// keys already written and the reserved ones.
func (o *Body) Options(opts map[string]any, reserved ...string) {
	keys := make([]string, 0, len(opts))
	for k := range opts {
		if o.Has(k) || slices.Contains(reserved, k) {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		o.Value(k, opts[k])
	}
}

// Bytes closes the object.
func (o *Body) Bytes() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	return append(o.b, '}'), nil
}

// Object walks the keys of the object at the scanner; fn must consume each
// value (call Skip for keys it ignores).
func Object(s *jsonlex.Scanner, fn func(key []byte) error) error {
	if s.IsNull() {
		return nil
	}
	if err := s.ObjectStart(); err != nil {
		return err
	}
	for first := true; ; first = false {
		key, ok, err := s.NextKey(first)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if err := fn(key); err != nil {
			return err
		}
	}
}

// Array walks the elements of the array at the scanner; fn must consume
// each element.
func Array(s *jsonlex.Scanner, fn func(i int) error) error {
	if s.IsNull() {
		return nil
	}
	if err := s.ArrayStart(); err != nil {
		return err
	}
	for i, first := 0, true; ; i, first = i+1, false {
		ok, err := s.NextElem(first)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if err := fn(i); err != nil {
			return err
		}
	}
}

// Skip consumes a value.
func Skip(s *jsonlex.Scanner) error {
	_, err := s.Raw()
	return err
}

// Str reads a string or null ("").
func Str(s *jsonlex.Scanner) (string, error) {
	if s.IsNull() {
		return "", nil
	}
	b, err := s.String(nil)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Int reads a number or null (0).
func Int(s *jsonlex.Scanner) (int64, error) {
	if s.IsNull() {
		return 0, nil
	}
	return s.Int()
}

// Bool reads a boolean or null (false).
func Bool(s *jsonlex.Scanner) (bool, error) {
	if s.IsNull() {
		return false, nil
	}
	return s.Bool()
}

// RawCopy reads any value and returns a copy of its bytes.
func RawCopy(s *jsonlex.Scanner) (json.RawMessage, error) {
	b, err := s.Raw()
	if err != nil {
		return nil, err
	}
	return append(json.RawMessage(nil), b...), nil
}

// I64 returns a pointer to v.
func I64(v int64) *int64 { return &v }

// OptionInt reads an integer model option.
func OptionInt(opts map[string]any, key string) (int64, bool) {
	switch v := opts[key].(type) {
	case int:
		return int64(v), true
	case int64:
		return v, true
	case float64:
		return int64(v), true
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	}
	return 0, false
}
