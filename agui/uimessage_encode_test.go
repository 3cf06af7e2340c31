package agui

import (
	"bytes"
	"encoding/json"
	"testing"
)

// uiMessagesByReflection is what AppendUIMessages stands in for:
// encoding/json with HTML escaping off.
func uiMessagesByReflection(t testing.TB, msgs []UIMessage) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msgs); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func TestAppendUIMessagesMatchesEncodingJSON(t *testing.T) {
	approved := true
	errText := "boom <b>&</b>"
	for _, tc := range []struct {
		name string
		msgs []UIMessage
	}{
		{"nil", nil},
		{"empty", []UIMessage{}},
		{"a turn", []UIMessage{
			{ID: "u-1", Role: "user", Parts: []UIPart{{Type: PartText, Content: "hi <there> & \"you\"\n\ttab"}}, CreatedAt: "2026-12-05T03:00:00.000Z"},
			{ID: "a-1", Role: "assistant", Parts: []UIPart{
				{Type: PartThinking, Content: "hmm", StepID: "s1", Signature: "sig"},
				{Type: PartText, Content: ""},
				{Type: PartToolCall, ID: "c1", Name: "read", Arguments: `{"path": "a b"}`, Input: json.RawMessage("{\"path\":  \"a b\" ,\n \"n\": [1, 2]}"),
					State: "input-complete", Approval: &Approval{ID: "ap", NeedsApproval: true, Approved: &approved},
					Output: json.RawMessage(`{ "ok" : true }`), Metadata: map[string]any{"z": 1, "a": "<x>"}},
				{Type: PartToolResult, ID: "r1", ToolCallID: "c1", Content: "done", State: "complete", Error: &errText, CreatedAt: "2026-12-05T03:00:01.000Z"},
				{Type: PartToolResult, ToolCallID: "c2", ContentParts: []ContentPart{{Type: PartText, Content: "x"}}, State: "error"},
				{Type: PartImage, Source: &Source{Type: "url", Value: "https://example.test/a.png?x=1&y=2", MimeType: "image/png"}},
				{Type: PartStructuredOutput, Status: "done", Partial: json.RawMessage(`{"a": 1}`), Data: json.RawMessage(`{"a":1}`), Raw: "{\"a\": 1}", Reasoning: "r", ErrorMessage: &errText},
				{Type: "data-custom", RawJSON: json.RawMessage("{\"type\": \"data-custom\",\n \"data\": {\"k\": [1, 2]}}")},
			}, Name: "bot", Metadata: map[string]any{"b": []any{1, "two"}, "a": map[string]any{"c": nil}}},
			{ID: "x", Role: "assistant", Parts: nil},
			{ID: "y", Role: "assistant", Parts: []UIPart{}, Metadata: map[string]any{}},
		}},
		{"unicode and bad bytes", []UIMessage{
			{ID: "ü-😀", Role: "user", Parts: []UIPart{{Type: PartText, Content: "ok \xff\xfe 😀 \u2028 \x00 \x1f"}}},
			{ID: "a\u2028b\xff", Role: "user\u2029", Name: "n\"\\", CreatedAt: "\x01", Parts: []UIPart{{Type: PartText, Content: "c\u2028"}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := uiMessagesByReflection(t, tc.msgs)
			got, err := AppendUIMessages([]byte("prefix:"), tc.msgs)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(got, []byte("prefix:")) {
				t.Fatalf("the buffer's bytes were not kept: %q", got)
			}
			if got := got[len("prefix:"):]; !bytes.Equal(got, want) {
				t.Fatalf("AppendUIMessages:\n%s\nencoding/json:\n%s", got, want)
			}
		})
	}
}

// A raw field that is not JSON fails the encoding, as it fails
// encoding/json's, rather than writing a transcript that is not JSON.
func TestAppendUIMessagesRefusesInvalidRawJSON(t *testing.T) {
	for _, part := range []UIPart{
		{Type: PartToolCall, ID: "c", Name: "n", Input: json.RawMessage(`{"a":`)},
		{Type: PartToolCall, ID: "c", Name: "n", Output: json.RawMessage(`{ "a": }`)},
		{Type: PartStructuredOutput, Data: json.RawMessage(`nope`)},
		{Type: "data-x", RawJSON: json.RawMessage(`{"type":"data-x"`)},
	} {
		msgs := []UIMessage{{ID: "a", Role: "assistant", Parts: []UIPart{part}}}
		if _, err := json.Marshal(msgs); err == nil {
			t.Fatalf("encoding/json accepted %+v", part)
		}
		if b, err := AppendUIMessages(nil, msgs); err == nil {
			t.Fatalf("AppendUIMessages wrote %s for %+v", b, part)
		}
	}
}

// FuzzAppendUIMessages holds the encoder to encoding/json's output for
// messages built from the fuzzer's strings.
func FuzzAppendUIMessages(f *testing.F) {
	f.Add("u-1", "user", "hello", `{"a": 1}`, "name")
	f.Add("", "", "", "null", "")
	f.Add("\xff", "<>&", "\u2029\n\"", " [1 , 2] ", "😀")
	f.Fuzz(func(t *testing.T, id, role, content, raw, name string) {
		parts := []UIPart{{Type: PartText, Content: content}}
		if json.Valid([]byte(raw)) {
			parts = append(parts, UIPart{Type: PartToolCall, ID: id, Name: name, Arguments: content, Input: json.RawMessage(raw), State: "input-complete"})
		}
		msgs := []UIMessage{{ID: id, Role: role, Parts: parts, Name: name, CreatedAt: content}}
		got, err := AppendUIMessages(nil, msgs)
		if err != nil {
			t.Fatal(err)
		}
		if want := uiMessagesByReflection(t, msgs); !bytes.Equal(got, want) {
			t.Fatalf("AppendUIMessages:\n%q\nencoding/json:\n%q", got, want)
		}
	})
}

// BenchmarkUIMessages encodes a short run's transcript (a user turn and a
// 200-token answer): AppendUIMessages against encoding/json.
func BenchmarkUIMessages(b *testing.B) {
	answer := bytes.Repeat([]byte("w7 "), 200)
	msgs := []UIMessage{
		{ID: "u-load-1", Role: "user", Parts: []UIPart{{Type: PartText, Content: "tell me a story"}}, CreatedAt: "2026-12-05T03:00:00.000Z"},
		{ID: "m-load-1", Role: "assistant", Parts: []UIPart{{Type: PartText, Content: string(answer)}}, CreatedAt: "2026-12-05T03:00:00.010Z"},
	}
	b.Run("append", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = AppendUIMessages(buf[:0], msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			uiMessagesByReflection(b, msgs)
		}
	})
}
