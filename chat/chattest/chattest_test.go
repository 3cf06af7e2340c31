package chattest_test

import (
	"testing"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/chat/chattest"
)

func TestAdapterReplaysTurnsAndRecordsRequests(t *testing.T) {
	a := chattest.NewAdapter(chattest.TextTurn("m", "hi", agui.FinishStop))
	evs, err := chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("hello")})
	if err != nil {
		t.Fatal(err)
	}
	chattest.WantTypes(t, evs, agui.RunStarted, agui.TextMessageStart, agui.TextMessageContent, agui.TextMessageEnd, agui.RunFinished)
	reqs := a.Requests()
	if len(reqs) != 1 || reqs[0].Messages[0].Content.String() != "hello" {
		t.Fatalf("requests %+v", reqs)
	}
	// Past the script: a RUN_ERROR event.
	evs, _ = chattest.Collect(t, chat.Options{Adapter: a, Messages: chattest.User("again")})
	if chattest.Types(evs) != "RUN_ERROR" || evs[0].Message != "script exhausted" {
		t.Fatalf("past the script: %s", chattest.Types(evs))
	}
}
