package harness

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/workspace"
)

// decodeFile runs a recorded CLI output through a decoder.
func decodeFile(t *testing.T, dec Decoder, name string) (*Emitter, []agui.Event) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var e Emitter
	var evs []agui.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if err := dec.Line(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		evs = append(evs, e.take()...)
	}
	e.closeAll("no outcome")
	return &e, append(evs, e.take()...)
}

func typesOf(evs []agui.Event) string {
	var s []string
	for _, ev := range evs {
		s = append(s, string(ev.Type))
	}
	return strings.Join(s, " ")
}

// A recorded `claude -p --output-format stream-json --verbose
// --include-partial-messages` run (against goai mock-provider): a Write
// tool call streamed in pieces, its result, then text.
func TestClaudeDecoderRecordedStream(t *testing.T) {
	e, evs := decodeFile(t, ClaudeCode{}.NewDecoder(), "testdata/claude-stream.ndjson")
	want := "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END"
	if got := typesOf(evs); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	if evs[0].ToolCallName != "Write" || evs[0].ToolCallID != "toolu_1" || evs[0].ParentMessageID != "msg_mock001" {
		t.Errorf("tool start %+v", evs[0])
	}
	if evs[0].Metadata["providerExecuted"] != true || evs[0].Metadata["sandboxObserved"] != true {
		t.Errorf("tool start metadata %+v", evs[0].Metadata)
	}
	if string(evs[2].Input) != `{"file_path":"/tmp/cc/ws/hello.txt","content":"hi\n"}` {
		t.Errorf("tool input %s", evs[2].Input)
	}
	if !strings.HasPrefix(evs[3].Content, "File created successfully") || evs[3].MessageID != "result-toolu_1" {
		t.Errorf("tool result %+v", evs[3])
	}
	if evs[5].Delta != "Done." || evs[4].MessageID != "msg_mock002" {
		t.Errorf("text %+v %+v", evs[4], evs[5])
	}
	if e.SessionID != "03781567-11e0-45e0-b532-262ce990e33d" || e.Failure != nil {
		t.Errorf("session %q failure %+v", e.SessionID, e.Failure)
	}
}

// Without partial messages, whole assistant messages are reported.
func TestClaudeDecoderWholeMessages(t *testing.T) {
	lines := []string{
		`{"type":"system","subtype":"init","session_id":"s1"}`,
		`{"type":"assistant","message":{"id":"m1","content":[{"type":"thinking","thinking":"plan","signature":"sig"},{"type":"text","text":"Hi."},{"type":"tool_use","id":"t1","name":"mcp__tanstack__add","input":{"a":1}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"3"}],"is_error":false}]}}`,
		`{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"false"}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":"exit 1","is_error":true}]}}`,
		`{"type":"assistant","parent_tool_use_id":"t9","message":{"id":"sub","content":[{"type":"text","text":"sub-agent"}]}}`,
		`{"type":"result","subtype":"error_max_turns","is_error":true,"result":"","usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":5}}`,
	}
	dec := ClaudeCode{}.NewDecoder()
	var e Emitter
	var evs []agui.Event
	for _, l := range lines {
		if err := dec.Line([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e.take()...)
	}
	want := "STEP_STARTED REASONING_START REASONING_MESSAGE_START REASONING_MESSAGE_CONTENT REASONING_MESSAGE_END REASONING_END STEP_FINISHED " +
		"TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT " +
		"TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT"
	if got := typesOf(evs); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	if evs[6].Signature != "sig" || evs[6].Content != "plan" {
		t.Errorf("reasoning step %+v", evs[6])
	}
	bridged := evs[10]
	if bridged.ToolCallName != "add" || bridged.Metadata["sandboxObserved"] != nil {
		t.Errorf("bridged call reported as %q %+v, want the app's own name, not observed", bridged.ToolCallName, bridged.Metadata)
	}
	if evs[13].Content != "3" || evs[17].Content != "exit 1" {
		t.Errorf("results %q %q", evs[13].Content, evs[17].Content)
	}
	if ts, _ := evs[17].Metadata["tanstack"].(map[string]any); ts["state"] != "output-error" {
		t.Errorf("failed result metadata %+v", evs[17].Metadata)
	}
	if e.Failure == nil || e.Failure.Code != "error_max_turns" {
		t.Errorf("failure %+v", e.Failure)
	}
	if e.Usage == nil || e.Usage.PromptTokens != 8 || e.Usage.CompletionTokens != 4 {
		t.Errorf("usage %+v", e.Usage)
	}
}

func TestCodexDecoderRecordedStream(t *testing.T) {
	e, evs := decodeFile(t, Codex{}.NewDecoder(), "testdata/codex-exec.ndjson")
	if got := typesOf(evs); got != "TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END" {
		t.Fatalf("events %s", got)
	}
	if evs[1].Delta != "Hello from codex." || e.SessionID == "" {
		t.Errorf("text %q session %q", evs[1].Delta, e.SessionID)
	}
}

func TestCodexDecoderItems(t *testing.T) {
	lines := []string{
		`{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"ls","status":"in_progress"}}`,
		`{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"ls","aggregated_output":"a\n","exit_code":0,"status":"completed"}}`,
		`{"type":"item.completed","item":{"id":"i2","type":"mcp_tool_call","server":"tanstack","tool":"add","arguments":{"a":1},"result":{"content":[{"type":"text","text":"3"}]},"status":"completed"}}`,
		`{"type":"item.completed","item":{"id":"i3","type":"file_change","changes":[{"path":"x","kind":"add"}],"status":"completed"}}`,
		`{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":2,"output_tokens":3}}`,
		`{"type":"turn.failed","error":{"message":"boom"}}`,
	}
	dec := Codex{}.NewDecoder()
	var e Emitter
	var evs []agui.Event
	for _, l := range lines {
		if err := dec.Line([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e.take()...)
	}
	want := "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT"
	if got := typesOf(evs); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	if evs[0].ToolCallName != "shell" || evs[3].Content != "a\n" || evs[4].ToolCallName != "add" || evs[7].Content != "3" {
		t.Errorf("calls: %q %q %q %q", evs[0].ToolCallName, evs[3].Content, evs[4].ToolCallName, evs[7].Content)
	}
	if e.Usage == nil || e.Usage.PromptTokens != 10 || e.Failure == nil || e.Failure.Message != "boom" {
		t.Errorf("usage %+v failure %+v", e.Usage, e.Failure)
	}
}

// Arbitrary lines never panic a decoder, and every tool call it opens is
// closed with an outcome by closeAll.
func FuzzDecoders(f *testing.F) {
	for _, name := range []string{"testdata/claude-stream.ndjson", "testdata/codex-exec.ndjson"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			f.Add(l)
		}
	}
	f.Add(`{"type":"stream_event","event":{"type":"content_block_delta","index":7,"delta":{"type":"text_delta","text":"x"}}}`)
	f.Fuzz(func(t *testing.T, line string) {
		for _, dec := range []Decoder{ClaudeCode{}.NewDecoder(), Codex{}.NewDecoder()} {
			var e Emitter
			_ = dec.Line([]byte(line), &e)
			_ = dec.Line([]byte(line), &e)
			e.closeAll("x")
			open := map[string]bool{}
			for _, ev := range e.take() {
				switch ev.Type {
				case agui.ToolCallStart:
					open[ev.ToolCallID] = true
				case agui.ToolCallResult:
					delete(open, ev.ToolCallID)
				}
			}
			if len(open) > 0 {
				t.Fatalf("calls without an outcome: %v", open)
			}
		}
	})
}

func TestPolicyMapping(t *testing.T) {
	p, err := workspace.ParsePolicy([]byte(`{"commands":{"allow":["go test *","ls"],"ask":["git push *"],"deny":["rm *","a*b"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	allow, deny, skipped := claudeRules(p)
	if strings.Join(allow, ",") != "Bash(go test:*),Bash(ls)" || strings.Join(deny, ",") != "Bash(rm:*),Bash(git push:*)" || strings.Join(skipped, ",") != "a*b" {
		t.Errorf("rules allow=%v deny=%v skipped=%v", allow, deny, skipped)
	}
	permit := PolicyPermit(p)
	for _, tc := range []struct {
		in   any
		want bool
	}{
		{map[string]any{"command": "go test ./..."}, true},
		{map[string]any{"command": "rm -rf /"}, false},
		{map[string]any{"command": "git push origin"}, false},
		{map[string]any{"command": []any{"ls"}}, true},
		{map[string]any{"path": "x"}, true},
	} {
		if got := permit(context.Background(), "t", tc.in); got != tc.want {
			t.Errorf("permit(%v) = %v", tc.in, got)
		}
	}
}

// The host's cost per agent event: one stream-json text delta line decoded
// and turned into its AG-UI chunk.
func BenchmarkClaudeTextDelta(b *testing.B) {
	dec := ClaudeCode{}.NewDecoder()
	var e Emitter
	for _, l := range []string{
		`{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_1","content":[]}},"session_id":"s","parent_tool_use_id":null}`,
		`{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}},"session_id":"s","parent_tool_use_id":null}`,
	} {
		if err := dec.Line([]byte(l), &e); err != nil {
			b.Fatal(err)
		}
	}
	line := []byte(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, world. "}},"session_id":"03781567-11e0-45e0-b532-262ce990e33d","parent_tool_use_id":null,"uuid":"bfcea84b-74dd-46a7-8825-c0f60ec9e6b4","api_message_id":"msg_1"}`)
	if err := dec.Line(line, &e); err != nil { // opens the text message
		b.Fatal(err)
	}
	e.take()
	b.ReportAllocs()
	for b.Loop() {
		if err := dec.Line(line, &e); err != nil {
			b.Fatal(err)
		}
		if len(e.take()) != 1 {
			b.Fatal("want one chunk")
		}
	}
}

func BenchmarkCodexItem(b *testing.B) {
	dec := Codex{}.NewDecoder()
	var e Emitter
	line := []byte(`{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Hello from codex."}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := dec.Line(line, &e); err != nil {
			b.Fatal(err)
		}
		e.take()
	}
}
