package agui

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// slowWire is AppendWire without the shortcut for events already in wire form.
func slowWire(e *Event) []byte {
	n := normalizeSpec(e)
	return appendEvent(nil, &n, true, e.Model)
}

// checkWireForm fails when writing e (or its normalized form) as it is gives
// other bytes than normalizing it first.
func checkWireForm(t *testing.T, e *Event) (fast int) {
	t.Helper()
	n := Normalize(e)
	for _, x := range []*Event{e, &n} {
		if !inWireForm(x) {
			continue
		}
		fast++
		if got, want := string(appendEvent(nil, x, true, "")), string(slowWire(x)); got != want {
			t.Errorf("event in wire form written as is:\n got %s\nwant %s", got, want)
		}
	}
	return fast
}

// Every chunk of the conformance scenarios, as the adapter yields it and as
// the engine normalizes it, encodes the same with and without the shortcut.
func TestInWireFormMatchesNormalization(t *testing.T) {
	files, _ := filepath.Glob("../conformance/scenarios/*.json")
	if len(files) == 0 {
		t.Fatal("no conformance scenarios")
	}
	fast, total := 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sc struct{ Turns [][]json.RawMessage }
		if err := json.Unmarshal(b, &sc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, turn := range sc.Turns {
			for _, raw := range turn {
				var e Event
				if err := e.UnmarshalJSON(raw); err != nil || e.Type == "" {
					continue
				}
				total++
				fast += checkWireForm(t, &e)
			}
		}
	}
	if fast == 0 || total == 0 {
		t.Fatalf("%d of %d chunks took the shortcut", fast, total)
	}
	t.Logf("%d shortcut encodings over %d chunks", fast, total)
}

func FuzzInWireForm(f *testing.F) {
	for _, s := range []string{
		`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant","model":"x"}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"r","finishReason":"stop","usage":{"promptTokens":1,"completionTokens":2,"totalTokens":3,"promptTokensDetails":{"cachedTokens":1}}}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c","toolName":"add","toolCallName":"add","index":0}`,
		`{"type":"TOOL_CALL_END","toolCallId":"c","input":{"a":1}}`,
		`{"type":"CUSTOM","name":"n","value":{"x":1},"metadata":{"tanstack":{"model":"m"}}}`,
		`{"type":"ACTIVITY_SNAPSHOT","messageId":"m","activityType":"a","replace":true,"other":1}`,
		`{"type":"RUN_ERROR","message":"boom","code":"x","error":{"message":"boom"}}`,
		`{"type":"TOOL_CALL_RESULT","toolCallId":"c","content":"5","result":"5","messageId":"r"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var e Event
		if e.UnmarshalJSON(data) != nil {
			return
		}
		checkWireForm(t, &e)
	})
}

func BenchmarkAppendWireNormalizedStart(b *testing.B) {
	raw := Event{Type: TextMessageStart, MessageID: "msg-1700000000000-abc123", Role: "assistant", Model: "gpt-4o", Timestamp: 1700000000000}
	e := Normalize(&raw)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendWire(buf[:0], &e)
	}
}
