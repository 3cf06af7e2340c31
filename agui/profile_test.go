package agui

import (
	"bytes"
	"strings"
	"testing"
)

func profileTypes(t *testing.T, p Profile, evs []Event) string {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, WriterOptions{Profile: p, ThreadID: "t", RunID: "r"})
	for i := range evs {
		if err := w.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var out []string
	for f, err := range ReadSSE(&buf) {
		if err != nil {
			t.Fatal(err)
		}
		name := string(f.Event.Type)
		if f.Event.Type == Custom {
			name += ":" + f.Event.Name
		}
		out = append(out, name)
	}
	return strings.Join(out, " ")
}

func TestAGUIProfileOneStartOneTerminal(t *testing.T) {
	evs := []Event{
		{Type: ToolCallResult, MessageID: "m", ToolCallID: "c0", Content: "x"}, // continuation result before any start
		{Type: RunStarted, ThreadID: "t", RunID: "r"},
		{Type: RunFinished, ThreadID: "t", RunID: "r", FinishReason: FinishToolCalls},
		{Type: ToolCallResult, MessageID: "m", ToolCallID: "c1", Content: "y"},
		{Type: RunStarted, ThreadID: "t", RunID: "r"},
		{Type: RunFinished, ThreadID: "t", RunID: "r", FinishReason: FinishStop},
		{Type: Custom, Name: "sandbox.file"}, // after the last turn: still inside the run
	}
	got := profileTypes(t, ProfileAGUI, evs)
	want := "RUN_STARTED TOOL_CALL_RESULT CUSTOM:turn.finished TOOL_CALL_RESULT CUSTOM:sandbox.file RUN_FINISHED"
	if got != want {
		t.Fatalf("agui profile:\n got %s\nwant %s", got, want)
	}
	if got := profileTypes(t, ProfileTanStack, evs); !strings.HasPrefix(got, "TOOL_CALL_RESULT RUN_STARTED RUN_FINISHED") {
		t.Fatalf("tanstack profile must write the sequence unchanged: %s", got)
	}
}

func TestAGUIProfileAbortEndsWithRunError(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, WriterOptions{ThreadID: "t", RunID: "r"})
	for _, e := range []Event{{Type: RunStarted, ThreadID: "t", RunID: "r"}, {Type: RunFinished, FinishReason: FinishToolCalls}, {Type: ToolCallResult, ToolCallID: "c"}} {
		_ = w.Write(&e)
	}
	_ = w.Abort("fail blocked", "")
	_ = w.Close()
	if !strings.HasSuffix(buf.String(), `{"type":"RUN_ERROR","message":"fail blocked","code":"aborted",`+buf.String()[strings.LastIndex(buf.String(), `"timestamp"`):]) {
		t.Fatalf("abort: %s", buf.String())
	}
	// A run an iteration limit stopped after its tool results still ends
	// with RUN_FINISHED, carrying the last turn's finish reason.
	got := profileTypes(t, ProfileAGUI, []Event{{Type: RunStarted}, {Type: RunFinished, FinishReason: FinishToolCalls}, {Type: ToolCallResult, ToolCallID: "c"}})
	if got != "RUN_STARTED CUSTOM:turn.finished TOOL_CALL_RESULT RUN_FINISHED" {
		t.Fatalf("got %s", got)
	}
	// RUN_ERROR after a RUN_FINISHED (a failing onFinish) stays the only terminal.
	got = profileTypes(t, ProfileAGUI, []Event{{Type: RunStarted}, {Type: RunFinished, FinishReason: FinishStop}, {Type: RunError, Message: "x"}})
	if got != "RUN_STARTED CUSTOM:turn.finished RUN_ERROR" {
		t.Fatalf("got %s", got)
	}
}

// A run that produced no event at all (a model that said nothing) still
// gets RUN_STARTED and RUN_FINISHED in the agui profile; the tanstack
// profile writes nothing, as 0.58.0 does.
func TestAGUIProfileEmptyRunFinishes(t *testing.T) {
	if got := profileTypes(t, ProfileAGUI, nil); got != "RUN_STARTED RUN_FINISHED" {
		t.Fatalf("agui: %q", got)
	}
	if got := profileTypes(t, ProfileTanStack, nil); got != "" {
		t.Fatalf("tanstack: %q", got)
	}
}
