package scripted_test

import (
	"context"
	"testing"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/scripted"
)

// addThenText calls the catalogue's add tool, then answers, through the
// log_hooks middleware.
const addThenText = `{"name":"add-then-text","tools":["add"],"middleware":["log_hooks"],
"messages":[{"role":"user","content":"add"}],
"turns":[
 [{"type":"RUN_STARTED"},
  {"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"add","index":0},
  {"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"a\":2,\"b\":3}"},
  {"type":"TOOL_CALL_END","toolCallId":"c1","toolCallName":"add","input":{"a":2,"b":3}},
  {"type":"RUN_FINISHED","finishReason":"tool_calls"}],
 [{"type":"RUN_STARTED"},
  {"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"},
  {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"5"},
  {"type":"TEXT_MESSAGE_END","messageId":"m"},
  {"type":"RUN_FINISHED","finishReason":"stop"}]]}`

// A catalogue keeps hook calls and tool executions only when asked to: a
// server shares one between all its runs and never reads them.
func TestCatalogueRecordsOnlyWhenAsked(t *testing.T) {
	for _, record := range []bool{false, true} {
		sc, err := scripted.Parse([]byte(addThenText))
		if err != nil {
			t.Fatal(err)
		}
		cat := &scripted.Catalogue{Record: record}
		opts, err := cat.Options(sc, scripted.New(sc))
		if err != nil {
			t.Fatal(err)
		}
		opts.Debug = chat.DebugNone()
		executed := false
		for ev, err := range chat.Stream(context.Background(), opts) {
			if err != nil {
				t.Fatal(err)
			}
			executed = executed || ev.Type == "TOOL_CALL_RESULT"
		}
		if !executed {
			t.Fatal("the scenario's add call was not executed")
		}
		hooks := cat.Hooks()
		sawExecute := false
		for _, h := range hooks {
			sawExecute = sawExecute || h.Hook == "tool:execute"
		}
		switch {
		case record && (len(hooks) == 0 || !sawExecute):
			t.Errorf("recording: %d hook records, tool execution recorded %v", len(hooks), sawExecute)
		case !record && len(hooks) > 0:
			t.Errorf("not recording, the catalogue kept %d hook records", len(hooks))
		}
	}
}
