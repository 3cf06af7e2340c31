package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/server"
	"github.com/goai-sdk/goai/web"
)

// TestUIInHeadlessChromium loads the page in a real browser, lets it send a
// message, and reads the rendered DOM: the user turn, the tool call the demo
// model makes, its result, and the streamed answer.
func TestUIInHeadlessChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is required (scripts/setup-chromium.sh installs it)")
		}
		t.Skip("chromium not installed; scripts/setup-chromium.sh installs it")
	}
	cat := &scripted.Catalogue{}
	tools, _ := cat.Tools([]string{"add"})
	h := server.ChatHandler(server.Config{Store: durable.NewMemory(nil), Options: func(*server.Request) (chat.Options, error) {
		return chat.Options{Adapter: scripted.Demo{WordDelay: time.Millisecond}, Tools: tools, Debug: chat.DebugNone()}, nil
	}})
	mux := http.NewServeMux()
	mux.Handle("/api/chat", h)
	mux.Handle("/", http.FileServerFS(web.FS))
	srv := httptest.NewServer(mux)
	defer func() { srv.Close(); h.Wait() }()

	profile := t.TempDir() // one browser profile: the page keeps its thread in localStorage
	load := func(url string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+profile,
			"--virtual-time-budget=10000", "--dump-dom", url)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium: %v", err)
		}
		return string(out)
	}
	want := []string{`class="msg user">please add 2 and 3`, `⚙ add`, `→ {"sum":5}`, `The tool answered {"sum":5}.`}
	dom := load(srv.URL + "/?q=please+add+2+and+3")
	for _, w := range want {
		if !strings.Contains(dom, w) {
			t.Errorf("rendered page lacks %q\n%s", w, dom)
		}
	}
	// A reload rebuilds the conversation from the server's thread store.
	dom = load(srv.URL + "/")
	for _, w := range want {
		if !strings.Contains(dom, w) {
			t.Errorf("after a reload the page lacks %q\n%s", w, dom)
		}
	}
}
