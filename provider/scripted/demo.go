package scripted

import (
	"context"
	"encoding/json"
	"iter"
	"regexp"
	"strings"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// Demo is the offline model goai serve uses when no provider is
// configured, so the whole loop can be seen without a key.
//
// Offered the workspace tools (write_file, edit_file, run_command, ...), it
// performs the same short coding task on any prompt: it lists the
// workspace, writes a small shell program, edits it, asks to run it (a
// command that needs approval under the default policy), runs it and
// explains what it did. Without them it streams a reply word by word, and
// calls the add tool when asked to add two numbers.
type Demo struct {
	// WordDelay paces the stream; default 30ms.
	WordDelay time.Duration
}

// Name implements chat.Adapter.
func (Demo) Name() string { return "scripted" }

// Model implements chat.Adapter.
func (Demo) Model() string { return "demo-1" }

var twoNumbers = regexp.MustCompile(`(-?\d+(?:\.\d+)?)\D+?(-?\d+(?:\.\d+)?)`)

// demoTurn is what the demo model says in one model call: some text, then
// optionally one tool call.
type demoTurn struct {
	text string
	tool string
	args any
}

// ChatStream implements chat.Adapter.
//
// A run waiting for the next word parks in demoText's timer wait: the
// events are built and yielded by functions of their own, so that no event
// is in the frames under that wait (each would be 656 bytes on the stack of
// every waiting run).
func (d Demo) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		delay := d.WordDelay
		if delay == 0 {
			delay = 30 * time.Millisecond
		}
		if !demoStarted(yield, req) {
			return
		}
		var turn demoTurn
		if hasTools(req.Tools, "list_files", "write_file", "edit_file", "run_command") {
			turn = codingTurn(req.Messages)
		} else {
			turn = chatTurn(req)
		}
		if turn.text != "" && !demoText(ctx, yield, turn.text, delay) {
			return
		}
		demoFinished(yield, req, &turn)
	}
}

//go:noinline
func demoStarted(yield func(agui.Event, error) bool, req *chat.Request) bool {
	return yield(agui.Event{Type: agui.RunStarted, ThreadID: req.ThreadID, RunID: req.RunID, Model: "demo-1"}, nil)
}

// demoText streams text word by word, delay apart.
func demoText(ctx context.Context, yield func(agui.Event, error) bool, text string, delay time.Duration) bool {
	msgID := "msg_" + newCallID()
	if !demoMessage(yield, agui.TextMessageStart, msgID, "") {
		return false
	}
	for _, w := range strings.SplitAfter(text, " ") {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		if !demoMessage(yield, agui.TextMessageContent, msgID, w) {
			return false
		}
	}
	return demoMessage(yield, agui.TextMessageEnd, msgID, "")
}

// demoMessage yields one event of a text message.
//
//go:noinline
func demoMessage(yield func(agui.Event, error) bool, typ agui.EventType, msgID, delta string) bool {
	ev := agui.Event{Type: typ, MessageID: msgID, Delta: delta}
	if typ == agui.TextMessageStart {
		ev.Role = "assistant"
	}
	return yield(ev, nil)
}

// demoFinished ends the turn: its tool call, if any, and RUN_FINISHED.
//
//go:noinline
func demoFinished(yield func(agui.Event, error) bool, req *chat.Request, turn *demoTurn) {
	n := int64(len(strings.Fields(turn.text)))
	usage := &agui.TokenUsage{PromptTokens: 12, CompletionTokens: n, TotalTokens: 12 + n}
	if turn.tool == "" {
		yield(agui.Event{Type: agui.RunFinished, ThreadID: req.ThreadID, RunID: req.RunID, FinishReason: agui.FinishStop, Usage: usage}, nil)
		return
	}
	id := "call_" + newCallID()
	args, _ := json.Marshal(turn.args)
	for _, ev := range []agui.Event{
		{Type: agui.ToolCallStart, ToolCallID: id, ToolCallName: turn.tool, Index: agui.Int(0)},
		{Type: agui.ToolCallArgs, ToolCallID: id, Delta: string(args)},
		{Type: agui.ToolCallEnd, ToolCallID: id, Input: args},
		{Type: agui.RunFinished, ThreadID: req.ThreadID, RunID: req.RunID, FinishReason: agui.FinishToolCalls, Usage: usage},
	} {
		if !yield(ev, nil) {
			return
		}
	}
}

func hasTools(tools []chat.ToolSpec, names ...string) bool {
	for _, n := range names {
		found := false
		for _, t := range tools {
			found = found || t.Name == n
		}
		if !found {
			return false
		}
	}
	return true
}

// chatTurn is the demo without workspace tools: an echo, or the add tool.
func chatTurn(req *chat.Request) demoTurn {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == agui.RoleTool {
		return demoTurn{text: "The tool answered " + req.Messages[n-1].Content.String() + "."}
	}
	user := lastUser(req.Messages)
	if m := twoNumbers.FindStringSubmatch(user); hasTools(req.Tools, "add") && m != nil && strings.Contains(strings.ToLower(user), "add") {
		return demoTurn{tool: "add", args: map[string]json.Number{"a": json.Number(m[1]), "b": json.Number(m[2])}}
	}
	if user == "" {
		return demoTurn{text: "Hello from the goai demo model. Send a message to begin."}
	}
	return demoTurn{text: "Hello from the goai demo model. You said: " + user + " (set GOAI_MODEL and a provider key for a real model; ask me to add 2 and 3 to see a tool call)"}
}

func lastUser(msgs []agui.ModelMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == agui.RoleUser {
			return msgs[i].Content.String()
		}
	}
	return ""
}

// DemoProgram is the program the demo writes, and DemoProgramEdited the
// same after its edit.
const (
	DemoProgramPath   = "greet.sh"
	DemoProgram       = "#!/bin/sh\n# greet.sh: greets everyone named on the command line.\nfor name in \"$@\"; do\n  echo \"Hello, $name!\"\ndone\n"
	demoEditOld       = "for name in \"$@\"; do\n"
	demoEditNew       = "# With no names, greet the world.\n[ $# -eq 0 ] && set -- world\nfor name in \"$@\"; do\n"
	DemoProgramEdited = "#!/bin/sh\n# greet.sh: greets everyone named on the command line.\n" + demoEditNew + "  echo \"Hello, $name!\"\ndone\n"
	// DemoCommand is the command the demo asks to run.
	DemoCommand = "sh greet.sh goai"
)

// codingTurn picks the demo's next step from the tool calls made since the
// last user message.
func codingTurn(msgs []agui.ModelMessage) demoTurn {
	start := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == agui.RoleUser {
			start = i
			break
		}
	}
	if start < 0 {
		return demoTurn{text: "Hello from the goai demo model. Send any message and I will show you a short coding task in this thread's workspace."}
	}
	last, lastID := "", ""
	for _, m := range msgs[start+1:] {
		if m.Role == agui.RoleAssistant && len(m.ToolCalls) > 0 {
			tc := m.ToolCalls[len(m.ToolCalls)-1]
			last, lastID = tc.Function.Name, tc.ID
		}
	}
	result := ""
	for _, m := range msgs[start+1:] {
		if m.Role == agui.RoleTool && m.ToolCallID == lastID {
			result = m.Content.String()
		}
	}
	switch last {
	case "":
		return demoTurn{
			text: "This is the **offline demo model**: whatever you ask, it runs the same short coding task in this thread's workspace so you can watch an agent work. " +
				"(For a real model, set `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` or `GEMINI_API_KEY`, or `GOAI_MODEL`, and restart `goai serve`.) First, a look at the workspace.",
			tool: "list_files", args: map[string]any{},
		}
	case "list_files":
		return demoTurn{text: "Now a small program: `greet.sh` greets everyone named on its command line.", tool: "write_file",
			args: map[string]string{"path": DemoProgramPath, "content": DemoProgram}}
	case "write_file":
		return demoTurn{text: "One improvement: with no names it should greet the world.", tool: "edit_file",
			args: map[string]string{"path": DemoProgramPath, "old_text": demoEditOld, "new_text": demoEditNew}}
	case "edit_file":
		return demoTurn{text: "Let me run it. Commands need your approval here.", tool: "run_command",
			args: map[string]string{"command": DemoCommand}}
	}
	var r struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
	}
	_ = json.Unmarshal([]byte(result), &r)
	if r.Error != "" || result == "" {
		msg := r.Error
		if msg == "" {
			msg = "no result"
		}
		return demoTurn{text: "The command did not run (" + msg + "). The program is in the workspace all the same: open `greet.sh` in the panel to see it and its diff."}
	}
	return demoTurn{text: "Done. Here is what I did:\n\n" +
		"1. listed the workspace files with `list_files`;\n" +
		"2. wrote `greet.sh` with `write_file`;\n" +
		"3. made it greet the world when given no names, with `edit_file`;\n" +
		"4. ran `" + DemoCommand + "` (after your approval), which printed:\n\n" +
		"```\n" + strings.TrimRight(r.Stdout, "\n") + "\n```\n\n" +
		"Click `greet.sh` in the workspace panel to see its diff."}
}

func newCallID() string {
	return strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
}
