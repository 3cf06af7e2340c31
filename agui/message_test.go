package agui

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestHashContent(t *testing.T) {
	// Values computed by the reference's hashContent in node.
	for _, tc := range []struct{ in, want string }{
		{"", "0"},
		{"a", "2p"},
		{"hmm", "27t4"},
		{"😀", "11zz7"}, // a surrogate pair: two UTF-16 code units
		{"same", "23i3q"},
		{strings.Repeat("x", 1000), "sdbd34"},
		{"\x00\uffff", "1ekf"},
		{"ünïcode 😀 ok", "d7ggfx"},
		{strings.Repeat("long thinking ", 100), "4w7z5c"},
	} {
		if got := hashContent(tc.in); got != tc.want {
			t.Errorf("hashContent(%.20q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestCoerceCreatedAt(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
		ok   bool
	}{
		{"2024-05-06T07:08:09Z", "2024-05-06T07:08:09.000Z", true},
		{"2024-05-06T07:08:09.123456Z", "2024-05-06T07:08:09.123Z", true},
		{"2024-05-06T09:08:09+02:00", "2024-05-06T07:08:09.000Z", true},
		{"2024-05-06", "2024-05-06T00:00:00.000Z", true},
		{"not a date", "", false},
		{"", "", false},
		{12, "", false},
		{nil, "", false},
	} {
		got, ok := coerceCreatedAt(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("coerceCreatedAt(%v) = %q %v, want %q %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestHarvestClientState(t *testing.T) {
	in, err := DecodeMessages([]byte(`[
		{"id":"a","role":"assistant","parts":[
			{"type":"tool-call","id":"c1","name":"pick","arguments":"{}","state":"complete","output": {"n" : 1}},
			{"type":"tool-call","id":"c2","name":"del","arguments":"{}","state":"approval-responded","approval":{"id":"ap2","needsApproval":true,"approved":false}},
			{"type":"tool-call","id":"c3","name":"del","arguments":"{}","state":"approval-requested","approval":{"id":"ap3","needsApproval":true}},
			{"type":"tool-call","id":"c4","name":"del","arguments":"{}","state":"complete","output":null,"approval":{"id":"ap4","needsApproval":true,"approved":true}},
			{"type":"tool-call","id":"c5","name":"x","arguments":"{}","state":"complete","output":null}
		]},
		{"id":"u","role":"user","parts":[{"type":"tool-call","id":"c9","name":"x","arguments":"{}","state":"complete","output":1}]},
		{"id":"r","role":"assistant","content":"row, not UI"}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	cs := HarvestClientState(in)
	if len(cs.ToolResults) != 2 || string(cs.ToolResults["c1"]) != `{"n":1}` || string(cs.ToolResults["c5"]) != "null" {
		t.Errorf("tool results %q", cs.ToolResults)
	}
	if len(cs.Approvals) != 1 || cs.Approvals["ap2"] != false {
		t.Errorf("approvals %v", cs.Approvals)
	}
	if _, ok := cs.Approvals["ap2"]; !ok {
		t.Error("ap2 missing")
	}
	msgs := ToModelMessages(in)
	b, _ := json.Marshal(msgs)
	// c2's denial becomes the reference's placeholder; c3 (still awaiting
	// the user) does not reach the model as a result.
	if !bytes.Contains(b, []byte(`{\"approved\":false,\"message\":\"User denied this action\"}`)) ||
		bytes.Contains(b, []byte(`"toolCallId":"c3"`)) {
		t.Errorf("messages %s", b)
	}
}

// AG-UI omits absent fields: nothing the caller did not set is written as
// null, on events or on message rows.
func TestNoNullForAbsentFields(t *testing.T) {
	types := []EventType{RunStarted, RunFinished, RunError, TextMessageStart, TextMessageContent, TextMessageEnd,
		ToolCallStart, ToolCallArgs, ToolCallEnd, ToolCallResult, StepStarted, StepFinished, ReasoningStart,
		ReasoningMessageStart, ReasoningMessageContent, ReasoningMessageEnd, ReasoningEnd, ReasoningEncryptedValue,
		MessagesSnapshot, StateSnapshot, StateDelta, Custom, Raw, "UNKNOWN"}
	for _, typ := range types {
		e := Event{Type: typ, Usage: &TokenUsage{}, Outcome: &Outcome{Type: "success"}, Error: &ErrorInfo{},
			Index: Int(0), Metadata: map[string]any{}}
		for _, b := range [][]byte{AppendWire(nil, &e), AppendJSON(nil, &e)} {
			if bytes.Contains(b, []byte("null")) {
				t.Errorf("%s: %s", typ, b)
			}
		}
	}
	rows := SnapshotMessages([]ModelMessage{{Role: RoleUser}, {Role: RoleAssistant}, {Role: RoleTool, ToolCallID: "c"},
		{Role: RoleSystem}}, "r")
	if b := MarshalWireMessages(rows); bytes.Contains(b, []byte("null")) {
		t.Errorf("rows: %s", b)
	}
	var ui UIMessage
	if err := json.Unmarshal([]byte(`{"id":"a","role":"assistant","parts":[{"type":"tool-call","id":"c","name":"f","arguments":"","state":"input-streaming"},{"type":"tool-result","toolCallId":"c","content":"x","state":"complete"},{"type":"thinking","content":"t"},{"type":"structured-output","status":"streaming","raw":""}]}`), &ui); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(ui); bytes.Contains(b, []byte("null")) {
		t.Errorf("UI message: %s", b)
	}
}

func TestUIPartRoundTrip(t *testing.T) {
	const in = `[{"type":"text","content":"hi","metadata":{"a":1}},` +
		`{"type":"image","source":{"type":"url","value":"u"}},` +
		`{"type":"tool-call","id":"c","name":"f","arguments":"{\"a\":1}","input":{"a":1},"state":"approval-responded","approval":{"id":"ap","needsApproval":true,"approved":true},"output":null,"metadata":{"m":true}},` +
		`{"type":"tool-result","id":"r","name":"f","toolCallId":"c","content":[{"type":"text","content":"x"}],"state":"error","error":"bad","metadata":{"k":"v"},"createdAt":"2024-01-01T00:00:00.000Z"},` +
		`{"type":"thinking","content":"t","stepId":"s","signature":"sig"},` +
		`{"type":"structured-output","status":"error","partial":{},"data":[1],"raw":"[1","reasoning":"r","errorMessage":""},` +
		`{"type":"ui-resource","resource":{"uri":"ui://x","mimeType":"text/html"},"toolCallId":"c","toolName":"f","serverId":"s"},` +
		`{"type":"future-part","x":[1,2]}]`
	var parts []UIPart
	if err := json.Unmarshal([]byte(in), &parts); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(parts)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, out, []byte(in)) {
		t.Errorf("round trip\n got %s\nwant %s", out, in)
	}
	if parts[6].ToolCallID != "c" || parts[6].Name != "f" {
		t.Errorf("ui-resource ids: %+v", parts[6])
	}
}

func TestDecodeMessagesErrors(t *testing.T) {
	for _, in := range []string{`{}`, `[1]`, `[{"role":"user","toolCalls":{}}]`, `[{"id":"x","parts":[{"content":"no type"}]}]`, `[`} {
		if _, _, err := ConvertMessages([]byte(in)); err == nil {
			t.Errorf("ConvertMessages(%s): no error", in)
		}
	}
}
