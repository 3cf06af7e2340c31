package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/server"
)

// Two users, each with a token of their own: a run and its thread belong to
// the principal that started them.
func ExampleConfig_tokens() {
	sc, _ := scripted.Parse([]byte(`{"name":"hi","turns":[[{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hello"},{"type":"TEXT_MESSAGE_END","messageId":"m"},{"type":"RUN_FINISHED","threadId":"t","runId":"r","finishReason":"stop"}]]}`))
	h := server.ChatHandler(server.Config{
		Store: durable.NewMemory(nil),
		Tokens: map[string]server.Principal{
			"token-of-alice-0001": "alice",
			"token-of-bob-000002": "bob",
		},
		Options: func(*server.Request) (chat.Options, error) {
			return chat.Options{Adapter: scripted.New(sc), Debug: chat.DebugNone()}, nil
		},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Wait()

	send := func(method, path, token, body string) int {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Run-Id", "run-1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		defer res.Body.Close()
		_, _ = res.Body.Read(make([]byte, 1<<16))
		return res.StatusCode
	}
	body := `{"threadId":"thread-1","runId":"run-1","messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[],"context":[]}`
	fmt.Println("alice starts:", send("POST", "/api/chat", "token-of-alice-0001", body))
	h.Wait()
	fmt.Println("bob hydrates alice's thread:", send("GET", "/api/chat/threads/thread-1", "token-of-bob-000002", ""))
	fmt.Println("alice hydrates it:", send("GET", "/api/chat/threads/thread-1", "token-of-alice-0001", ""))
	// Output:
	// alice starts: 200
	// bob hydrates alice's thread: 403
	// alice hydrates it: 200
}
