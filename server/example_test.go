package server_test

import (
	"bufio"
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/server"
)

// exampleGreeter is a stand-in model that answers every request with one
// line of text; a real adapter comes from provider/... or provider/fromenv.
type exampleGreeter struct{}

func (exampleGreeter) Name() string  { return "greeter" }
func (exampleGreeter) Model() string { return "greeter-1" }

func (exampleGreeter) ChatStream(context.Context, *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		for _, ev := range []agui.Event{
			{Type: agui.RunStarted},
			{Type: agui.TextMessageStart, MessageID: "m1", Role: agui.RoleAssistant},
			{Type: agui.TextMessageContent, MessageID: "m1", Delta: "Hello!"},
			{Type: agui.TextMessageEnd, MessageID: "m1"},
			{Type: agui.RunFinished, FinishReason: agui.FinishStop},
		} {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// The body a TanStack or AG-UI client POSTs to /api/chat.
const exampleBody = `{"threadId":"thread-1","runId":"run-1","state":{},"tools":[],"context":[],
	"forwardedProps":{},"messages":[{"id":"u1","role":"user","content":"Hi"}]}`

// printSSE prints the id and the event type of each SSE event in body.
func printSSE(resp *http.Response) {
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	id := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			var ev agui.Event
			if err := ev.UnmarshalJSON([]byte(v)); err != nil {
				fmt.Println("bad event:", err)
				return
			}
			fmt.Println(strings.TrimSpace(id + " " + string(ev.Type) + " " + ev.Name))
		}
	}
}

// ChatHandler serves /api/chat: each POST runs the engine with the options
// Config.Options builds for it and streams the events as SSE.
func ExampleChatHandler() {
	h := server.ChatHandler(server.Config{
		Options: func(*server.Request) (chat.Options, error) {
			return chat.Options{Adapter: exampleGreeter{}}, nil
		},
	})
	defer h.Wait()
	mux := http.NewServeMux()
	mux.Handle("/api/chat", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/api/chat", "application/json", strings.NewReader(exampleBody))
	if err != nil {
		fmt.Println(err)
		return
	}
	printSSE(resp)
	// Output:
	// RUN_STARTED
	// TEXT_MESSAGE_START
	// TEXT_MESSAGE_CONTENT
	// TEXT_MESSAGE_END
	// RUN_FINISHED
}

// With a Store, a request that carries X-Run-Id is a durable run: every
// event is appended to the run's log before it is sent and carries its
// offset, and a client that lost the stream re-sends the request with
// Last-Event-ID to get the rest, without the model being called again.
// durable/sqlite and durable/postgres are the persistent stores.
func Example_durable() {
	h := server.ChatHandler(server.Config{
		Options: func(*server.Request) (chat.Options, error) {
			return chat.Options{Adapter: exampleGreeter{}}, nil
		},
		Store: durable.NewMemory(nil),
	})
	mux := http.NewServeMux()
	mux.Handle("/api/chat", h)
	srv := httptest.NewServer(mux)
	defer func() {
		h.Wait() // the runs end into their logs
		// Streams that waited long enough to be taken over from net/http
		// (Config.ReleaseIdleAfter) end with their logs.
		_ = h.Shutdown(context.Background())
		srv.Close()
	}()

	post := func(lastEventID string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/chat", strings.NewReader(exampleBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Run-Id", "run-1")
		if lastEventID != "" {
			req.Header.Set("Last-Event-ID", lastEventID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		printSSE(resp)
	}
	post("")
	fmt.Println("-- resumed after offset 3:")
	post("NWmDaF4i:3") // the id of the third event above
	// Output:
	// NWmDaF4i:1 RUN_STARTED
	// NWmDaF4i:2 CUSTOM run.accepted
	// NWmDaF4i:3 TEXT_MESSAGE_START
	// NWmDaF4i:4 TEXT_MESSAGE_CONTENT
	// NWmDaF4i:5 TEXT_MESSAGE_END
	// NWmDaF4i:6 RUN_FINISHED
	// -- resumed after offset 3:
	// NWmDaF4i:4 TEXT_MESSAGE_CONTENT
	// NWmDaF4i:5 TEXT_MESSAGE_END
	// NWmDaF4i:6 RUN_FINISHED
}
