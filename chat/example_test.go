package chat_test

import (
	"context"
	"fmt"
	"iter"
	"strings"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// exampleCalculator is a stand-in model for the examples: on a fresh question it
// calls the "add" tool, and once the tool has answered it states the result.
// A real adapter (provider/openai, provider/anthropic, ...) yields the same
// kind of events from a provider's stream.
type exampleCalculator struct{}

func (exampleCalculator) Name() string  { return "exampleCalculator" }
func (exampleCalculator) Model() string { return "exampleCalculator-1" }

func (exampleCalculator) ChatStream(_ context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		last := req.Messages[len(req.Messages)-1]
		var turn []agui.Event
		if last.Role == agui.RoleTool {
			turn = exampleReply("The sum is " + last.Content.String() + ".")
		} else if len(req.Tools) > 0 {
			turn = []agui.Event{
				{Type: agui.RunStarted},
				{Type: agui.ToolCallStart, ToolCallID: "call-1", ToolCallName: "add", ToolName: "add"},
				{Type: agui.ToolCallArgs, ToolCallID: "call-1", Delta: `{"a":2,"b":3}`},
				{Type: agui.ToolCallEnd, ToolCallID: "call-1"},
				{Type: agui.RunFinished, FinishReason: agui.FinishToolCalls},
			}
		} else {
			turn = exampleReply("I can only add.")
		}
		for _, ev := range turn {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func exampleReply(text string) []agui.Event {
	return []agui.Event{
		{Type: agui.RunStarted},
		{Type: agui.TextMessageStart, MessageID: "msg-1", Role: agui.RoleAssistant},
		{Type: agui.TextMessageContent, MessageID: "msg-1", Delta: text},
		{Type: agui.TextMessageEnd, MessageID: "msg-1"},
		{Type: agui.RunFinished, FinishReason: agui.FinishStop},
	}
}

func exampleQuestion(text string) []agui.ModelMessage {
	return []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text(text)}}
}

// Stream runs the agent loop and yields its events as they happen; the
// first error ends the stream.
func ExampleStream() {
	for ev, err := range chat.Stream(context.Background(), chat.Options{
		Adapter:  exampleCalculator{},
		Messages: exampleQuestion("Hello"),
	}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(strings.TrimSpace(string(ev.Type) + " " + ev.Delta))
	}
	// Output:
	// RUN_STARTED
	// TEXT_MESSAGE_START
	// TEXT_MESSAGE_CONTENT I can only add.
	// TEXT_MESSAGE_END
	// RUN_FINISHED
}

// NewTool turns a typed Go function into a tool: its JSON Schema comes from
// the input type, and the model's arguments are checked against it before
// the function runs. The engine runs the call and feeds the result back to
// the model in the next turn.
func ExampleNewTool() {
	type operands struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	add := chat.NewTool("add", "Add two numbers", func(_ context.Context, in operands) (float64, error) {
		return in.A + in.B, nil
	})
	for ev, err := range chat.Stream(context.Background(), chat.Options{
		Adapter:  exampleCalculator{},
		Messages: exampleQuestion("What is 2 + 3?"),
		Tools:    []*chat.Tool{add},
	}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch ev.Type {
		case agui.ToolCallStart:
			fmt.Println("call", ev.ToolCallName)
		case agui.ToolCallResult:
			fmt.Println("result", ev.Content)
		case agui.TextMessageContent:
			fmt.Println("text", ev.Delta)
		}
	}
	// Output:
	// call add
	// result 5
	// text The sum is 5.
}

// A middleware is a struct of optional hooks. This one counts model turns
// and upper-cases the streamed text; the history keeps what the model said.
func ExampleMiddleware() {
	turns := 0
	shout := &chat.Middleware{
		Name: "shout",
		OnIteration: func(*chat.Context, chat.IterationInfo) error {
			turns++
			return nil
		},
		OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
			if ev.Type != agui.TextMessageContent {
				return chat.Pass, nil
			}
			up := *ev
			up.Delta = strings.ToUpper(ev.Delta)
			return chat.Replace(up), nil
		},
		OnFinish: func(_ *chat.Context, info chat.FinishInfo) error {
			fmt.Println("finished:", info.FinishReason, "after", turns, "turn(s)")
			return nil
		},
	}
	text, err := chat.Text(context.Background(), chat.Options{
		Adapter:    exampleCalculator{},
		Messages:   exampleQuestion("Hello"),
		Middleware: []*chat.Middleware{shout},
	})
	fmt.Println(text, err)
	// Output:
	// finished: stop after 1 turn(s)
	// I CAN ONLY ADD. <nil>
}
