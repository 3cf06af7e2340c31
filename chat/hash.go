package chat

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"

	"github.com/goai-sdk/goai/agui"
)

// canonicalJSON renders v with sorted object keys and no whitespace.
func canonicalJSON(v any) []byte {
	b, err := marshalCompact(v)
	if err != nil {
		return []byte("null")
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return []byte("null")
	}
	return appendCanonical(nil, x)
}

func appendCanonical(b []byte, v any) []byte {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = agui.AppendString(b, k)
			b = append(b, ':')
			b = appendCanonical(b, x[k])
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanonical(b, e)
		}
		return append(b, ']')
	case string:
		return agui.AppendString(b, x)
	case float64:
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case bool:
		return strconv.AppendBool(b, x)
	case nil:
		return append(b, "null"...)
	}
	return append(b, "null"...)
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

func hashValue(v any) string { return digest(canonicalJSON(v)) }

// hashSchema hashes a schema; an absent one hashes the text "undefined".
func hashSchema(s json.RawMessage) string {
	if s == nil {
		return digest([]byte("undefined"))
	}
	return hashValue(s)
}
