package chat_test

import (
	"encoding/json"
	"testing"

	"github.com/goai-sdk/goai/chat"
)

func TestStrictArguments(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","required":["city","tags"],"properties":{
		"city":{"type":"string"},
		"units":{"type":"string"},
		"note":{"type":["string","null"]},
		"tags":{"type":"array","items":{"type":"object","required":["k"],"properties":{"k":{"type":"string"},"v":{"type":"integer"}}}},
		"where":{"type":"object","properties":{"lat":{"type":"number"},"lon":{"type":"number"}}}}}`)
	for _, tc := range []struct{ name, args, want string }{
		{"optional null dropped", `{"city":"Oslo","units":null,"tags":[]}`, `{"city":"Oslo","tags":[]}`},
		{"nullable keeps its null", `{"city":"Oslo","note":null,"tags":[]}`, `{"city":"Oslo","note":null,"tags":[]}`},
		{"required null kept for validation to reject", `{"city":null,"tags":[]}`, `{"city":null,"tags":[]}`},
		{"inside array items", `{"city":"a","tags":[{"k":"x","v":null},{"k":"y","v":2}]}`, `{"city":"a","tags":[{"k":"x"},{"k":"y","v":2}]}`},
		{"optional object null", `{"city":"a","tags":[],"where":null}`, `{"city":"a","tags":[]}`},
		{"inside optional object", `{"city":"a","tags":[],"where":{"lat":1,"lon":null}}`, `{"city":"a","tags":[],"where":{"lat":1}}`},
		{"not JSON unchanged", `{"city":`, `{"city":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(chat.StrictArguments(schema, json.RawMessage(tc.args))); got != tc.want {
				t.Fatalf("StrictArguments(%s) = %s, want %s", tc.args, got, tc.want)
			}
		})
	}
	if got := string(chat.StrictArguments(json.RawMessage(`{"type":"string"}`), json.RawMessage(`null`))); got != "null" {
		t.Fatalf("non-object schema: got %s", got)
	}
}
