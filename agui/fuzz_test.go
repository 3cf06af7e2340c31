package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

var eventSeeds = []string{
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hello \u2028 \"x\" <b>&</b>"}`,
	`{"type":"RUN_FINISHED","threadId":"t","runId":"r","finishReason":null,"usage":{"promptTokens":1,"completionTokens":2,"totalTokens":3,"promptTokensDetails":{"cachedTokens":1},"cost":0.5}}`,
	`{"type":"RUN_FINISHED","threadId":"t","runId":"r","usage":[{"inputTokens":1,"outputTokens":2,"totalTokens":3,"cachedInputTokens":1}],"metadata":{"tanstack":{"usage":{"cost":1},"finishReason":"stop"}}}`,
	`{"type":"RUN_ERROR","error":{"message":"boom","code":429},"timestamp":5}`,
	`{"type":"TOOL_CALL_START","toolCallId":"c","toolName":"f","index":0,"metadata":{"thoughtSignature":"s"}}`,
	`{"type":"TOOL_CALL_END","toolCallId":"c","input":{"a":[1,2]},"result":"{}","state":"output-error"}`,
	`{"type":"STEP_FINISHED","stepName":"s","stepId":"i","signature":"sig","content":"c"}`,
	`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":1}]}`,
	`{"type":"CUSTOM","name":"x","value":{"a":null},"threadId":"t"}`,
	`{"type":"RUN_FINISHED","outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"tool"}]}}`,
	`{"type":"X","foo":[1,{"b":"c"}],"timestamp":1e3}`,
}

// FuzzEventRoundTrip checks that decoding is total (never panics) and that
// decode → AppendJSON → decode is a fixed point; the wire form of any
// decodable event is itself a decodable event.
func FuzzEventRoundTrip(f *testing.F) {
	for _, s := range eventSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var e Event
		if err := e.UnmarshalJSON(data); err != nil {
			return
		}
		first := AppendJSON(nil, &e)
		var e2 Event
		if err := e2.UnmarshalJSON(first); err != nil {
			t.Fatalf("re-decoding %s (from %q): %v", first, data, err)
		}
		second := AppendJSON(nil, &e2)
		if !bytes.Equal(first, second) {
			t.Fatalf("not stable:\n%s\n%s", first, second)
		}
		wire := AppendWire(nil, &e)
		var w Event
		if err := w.UnmarshalJSON(wire); err != nil {
			t.Fatalf("wire form %s does not decode: %v", wire, err)
		}
		if bytes.Contains(wire, []byte(":null")) && !bytes.Contains(data, []byte("null")) {
			t.Fatalf("wire form %s writes a null the input did not have", wire)
		}
		Restore(&w)
		_ = AppendJSON(nil, &w)
		n := Normalize(&e)
		_ = AppendWire(nil, &n)
		_ = Fanout(&e)
	})
}

func FuzzReadSSE(f *testing.F) {
	f.Add([]byte("data: " + eventSeeds[0] + "\n\n"))
	f.Add([]byte("id: 7\r\ndata: " + eventSeeds[1] + "\r\n\r\n: comment\nevent: x\nretry: 1\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"type\":\ndata: \"RUN_STARTED\"}\n\n"))
	f.Add([]byte("data: {\"type\":\"RUN_STARTED\"}\n{\"type\":\"X\"}\nid\ndata: [DONE]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for fr, err := range ReadSSE(bytes.NewReader(data)) {
			if err != nil {
				return
			}
			checkFrame(t, fr)
		}
	})
}

func FuzzReadNDJSON(f *testing.F) {
	f.Add([]byte(eventSeeds[0] + "\n" + eventSeeds[2] + "\n"))
	f.Add([]byte(`{"id":"3","chunk":` + eventSeeds[3] + "}\n\n"))
	f.Add([]byte(`{"id":3,"chunk":{"type":"RUN_STARTED"}}` + "\n" + `{"type":"RUN_`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for fr, err := range ReadNDJSON(bytes.NewReader(data)) {
			if err != nil {
				return
			}
			checkFrame(t, fr)
		}
	})
}

func checkFrame(t *testing.T, fr Frame) {
	t.Helper()
	if fr.Event.Type == "" {
		t.Fatalf("frame without a type: %+v", fr)
	}
	b := AppendJSON(nil, &fr.Event)
	if !json.Valid(b) {
		t.Fatalf("AppendJSON wrote invalid JSON %s", b)
	}
	b = AppendWire(nil, &fr.Event)
	if !json.Valid(b) {
		t.Fatalf("AppendWire wrote invalid JSON %s", b)
	}
}

func FuzzParseRunInput(f *testing.F) {
	var cases []refRequestCase
	raw, err := os.ReadFile("testdata/ref_request.json")
	if err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		f.Add([]byte(c.Body))
	}
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}],"metadata":{"tanstack":{"toolCallMetadata":{"c":{"x":1}}}}},{"id":"t","role":"tool","toolCallId":"c","content":"1","metadata":{"tanstack":{"toolResult":{"content":[{"type":"text","content":"x"}]}}}}],"tools":[],"context":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParseRunInput(data)
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) || len(re.Problems) == 0 {
				t.Fatalf("error %v is not a *RequestError with problems", err)
			}
			return
		}
		msgs := ToModelMessages(in.InputMessages())
		if _, err := json.Marshal(msgs); err != nil {
			t.Fatalf("converted messages do not marshal: %v", err)
		}
		snap := MarshalWireMessages(SnapshotMessages(msgs, in.RunID))
		if !json.Valid(snap) {
			t.Fatalf("snapshot is not valid JSON: %s", snap)
		}
	})
}
