package chat_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
)

// TestOnChunkMutationDoesNotLeak: a middleware that changes the chunk it
// was given in place (scalars, pointers, nested maps, raw JSON) and returns
// Pass changes nothing for later middleware or the consumer.
func TestOnChunkMutationDoesNotLeak(t *testing.T) {
	turn := []agui.Event{
		{Type: agui.RunStarted, ThreadID: "t", RunID: "r"},
		{Type: agui.TextMessageStart, MessageID: "m", Role: "assistant"},
		{Type: agui.TextMessageContent, MessageID: "m", Delta: "hello",
			Metadata: map[string]any{"k": map[string]any{"n": 1.0}, "list": []any{"a"}}, Extra: map[string]json.RawMessage{"x": json.RawMessage(`1`)}},
		{Type: agui.Custom, Name: "progress", Value: json.RawMessage(`{"p":1}`)},
		{Type: agui.TextMessageEnd, MessageID: "m"},
		{Type: agui.RunFinished, ThreadID: "t", RunID: "r", FinishReason: "stop", Usage: &agui.TokenUsage{TotalTokens: 3,
			PromptTokensDetails: &agui.PromptTokensDetails{CachedTokens: new(int64(1))}}},
	}
	vandal := &chat.Middleware{Name: "vandal", OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
		ev.Delta = "x"
		ev.MessageID = "other"
		if ev.Metadata != nil {
			ev.Metadata["k"].(map[string]any)["n"] = 2.0
			ev.Metadata["list"].([]any)[0] = "b"
			ev.Metadata["new"] = true
		}
		if ev.Extra != nil {
			ev.Extra["x"][0] = '9'
		}
		if len(ev.Value) > 0 {
			ev.Value[2] = 'q'
		}
		if ev.Usage != nil {
			ev.Usage.TotalTokens = 99
			*ev.Usage.PromptTokensDetails.CachedTokens = 42
		}
		return chat.Pass, nil
	}}
	var seen []agui.Event
	witness := &chat.Middleware{Name: "witness", OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
		seen = append(seen, *ev)
		return chat.Pass, nil
	}}
	a := &chattest.Adapter{Turns: [][]agui.Event{turn}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{vandal, witness}})
	if err != nil {
		t.Fatal(err)
	}
	// The witness saw the adapter's chunks as they were.
	if len(seen) != len(turn) {
		t.Fatalf("witness saw %d chunks, want %d", len(seen), len(turn))
	}
	for i := range turn {
		if !reflect.DeepEqual(seen[i], turn[i]) {
			t.Errorf("chunk %d reached the next middleware changed:\n got %+v\nwant %+v", i, seen[i], turn[i])
		}
	}
	// So did the consumer (after normalization).
	for _, e := range evs {
		switch e.Type {
		case agui.TextMessageContent:
			if e.Delta != "hello" || e.MessageID != "m" {
				t.Errorf("consumer got %q in %q", e.Delta, e.MessageID)
			}
		case agui.Custom:
			if string(e.Value) != `{"p":1}` {
				t.Errorf("consumer got value %s", e.Value)
			}
		case agui.RunFinished:
			if e.Usage == nil || e.Usage.TotalTokens != 3 || *e.Usage.PromptTokensDetails.CachedTokens != 1 {
				t.Errorf("consumer got usage %+v", e.Usage)
			}
		}
	}
	// Nor did the adapter's own chunks change.
	if turn[2].Metadata["k"].(map[string]any)["n"] != 1.0 || string(turn[2].Extra["x"]) != "1" || turn[5].Usage.TotalTokens != 3 {
		t.Fatal("the adapter's chunk was changed in place")
	}
}

// Replace still changes a chunk.
func TestOnChunkReplaceChanges(t *testing.T) {
	upper := &chat.Middleware{Name: "upper", OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
		if ev.Type != agui.TextMessageContent {
			return chat.Pass, nil
		}
		ev.Delta = "HELLO" // the hook's own copy: fine to edit and hand back
		return chat.Replace(*ev), nil
	}}
	a := &chattest.Adapter{Turns: [][]agui.Event{chattest.TextTurn("m", "hello", "stop")}}
	text, err := chat.Text(context.Background(), chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{upper}})
	if err != nil || text != "HELLO" {
		t.Fatalf("%q %v", text, err)
	}
}

// A middleware that names its chunk types sees those alone; the others
// reach the later middleware and the consumer as if it were not there,
// and one it drops or replaces among its types is dropped or replaced.
func TestOnChunkTypes(t *testing.T) {
	var picky, all []agui.EventType
	choosy := &chat.Middleware{Name: "choosy", ChunkTypes: []agui.EventType{agui.TextMessageContent, agui.Custom},
		OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
			picky = append(picky, ev.Type)
			switch ev.Type {
			case agui.Custom:
				return chat.Drop(), nil
			case agui.TextMessageContent:
				ev.Delta = "HELLO"
				return chat.Replace(*ev), nil
			}
			return chat.Pass, nil
		}}
	witness := &chat.Middleware{Name: "witness", OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
		all = append(all, ev.Type)
		return chat.Pass, nil
	}}
	turn := []agui.Event{
		{Type: agui.RunStarted, ThreadID: "t", RunID: "r"},
		{Type: agui.TextMessageStart, MessageID: "m", Role: "assistant"},
		{Type: agui.TextMessageContent, MessageID: "m", Delta: "hello"},
		{Type: agui.Custom, Name: "progress", Value: json.RawMessage(`{"p":1}`)},
		{Type: agui.TextMessageEnd, MessageID: "m"},
		{Type: agui.RunFinished, ThreadID: "t", RunID: "r", FinishReason: "stop"},
	}
	a := &chattest.Adapter{Turns: [][]agui.Event{turn}}
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("x"), Middleware: []*chat.Middleware{choosy, witness}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []agui.EventType{agui.TextMessageContent, agui.Custom}; !reflect.DeepEqual(picky, want) {
		t.Fatalf("the choosy middleware saw %v, want %v", picky, want)
	}
	if want := []agui.EventType{agui.RunStarted, agui.TextMessageStart, agui.TextMessageContent, agui.TextMessageEnd, agui.RunFinished}; !reflect.DeepEqual(all, want) {
		t.Fatalf("the next middleware saw %v, want %v (the custom chunk dropped)", all, want)
	}
	var text string
	for _, e := range evs {
		if e.Type == agui.Custom {
			t.Fatalf("the dropped chunk reached the consumer: %+v", e)
		}
		if e.Type == agui.TextMessageContent {
			text += e.Delta
		}
	}
	if text != "HELLO" {
		t.Fatalf("consumer text %q, want the replaced HELLO", text)
	}
}
