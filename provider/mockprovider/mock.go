// Package mockprovider serves a scripted scenario over a real provider's
// wire protocol, so adapters can be exercised end to end on loopback:
// goai mock-provider --api openai-responses|openai-chat|anthropic|gemini|ollama
// --scenario FILE [--addr 127.0.0.1:0] [--record DIR].
//
// Each request is answered with the scenario's next turn (turn N for the
// N-th request, counted across all requests). A turn's items are adapter
// chunks (AG-UI events with the TanStack extras); the server writes them
// back in the provider's format: text, reasoning (with its signature),
// tool calls with streamed arguments, usage and the finish reason. A turn
// whose first chunk (after RUN_STARTED) is a RUN_ERROR with a numeric HTTP
// status as its code is answered with that status and the provider's
// error body, which exercises retries; any other RUN_ERROR is sent as the
// provider's in-stream error (code "max_tokens" becomes Anthropic's
// stop_reason max_tokens). {"delayMs": N} items flush and pause.
package mockprovider

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/provider/scripted"
)

// APIs lists the supported wire protocols.
var APIs = []string{"openai-responses", "openai-chat", "anthropic", "gemini", "ollama"}

// BasePath is the path prefix an adapter's base URL should end with for api.
func BasePath(api string) string {
	switch api {
	case "gemini":
		return "/v1beta"
	case "ollama":
		return ""
	}
	return "/v1"
}

// Handler serves a scenario for one API.
type Handler struct {
	api       string
	sc        *scripted.Scenario
	recordDir string

	mu       sync.Mutex
	requests int
}

// NewHandler returns the handler for api serving sc; when recordDir is not
// empty every request body is written there as NNN.json (001.json first).
// sc must come from scripted.LoadFile or scripted.Parse (a LoadFileLazy
// scenario keeps its turns private). The handler is safe for concurrent
// requests; turns are handed out in arrival order.
func NewHandler(api string, sc *scripted.Scenario, recordDir string) http.Handler {
	return &Handler{api: api, sc: sc, recordDir: recordDir}
}

func (h *Handler) pathOK(p string) bool {
	switch h.api {
	case "openai-responses":
		return strings.HasSuffix(p, "/responses")
	case "openai-chat":
		return strings.HasSuffix(p, "/chat/completions")
	case "anthropic":
		return strings.HasSuffix(p, "/messages")
	case "gemini":
		return strings.HasSuffix(p, ":streamGenerateContent")
	case "ollama":
		return strings.HasSuffix(p, "/api/chat")
	}
	return false
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !h.pathOK(r.URL.Path) {
		http.Error(w, `{"error":{"message":"mock-provider: no such endpoint"}}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	h.mu.Lock()
	h.requests++
	n := h.requests
	h.mu.Unlock()
	if h.recordDir != "" {
		_ = os.MkdirAll(h.recordDir, 0o755)
		_ = os.WriteFile(filepath.Join(h.recordDir, fmt.Sprintf("%03d.json", n)), body, 0o644)
	}
	if n > len(h.sc.Turns) {
		writeHTTPError(w, h.api, http.StatusBadRequest, "invalid_request_error", "mock-provider: script exhausted")
		return
	}
	turn := h.sc.Turns[n-1]
	if st, code, msg, ok := httpFailure(turn); ok {
		writeHTTPError(w, h.api, st, code, msg)
		return
	}
	model := modelOf(body)
	var wr writer
	base := &out{w: w, model: model, n: n}
	if f, ok := w.(http.Flusher); ok {
		base.f = f
	}
	switch h.api {
	case "openai-responses":
		w.Header().Set("Content-Type", "text/event-stream")
		wr = &responsesWriter{out: base}
	case "openai-chat":
		w.Header().Set("Content-Type", "text/event-stream")
		wr = &chatWriter{out: base}
	case "anthropic":
		w.Header().Set("Content-Type", "text/event-stream")
		wr = &anthropicWriter{out: base}
	case "gemini":
		w.Header().Set("Content-Type", "text/event-stream")
		wr = &geminiWriter{out: base}
	case "ollama":
		w.Header().Set("Content-Type", "application/x-ndjson")
		wr = &ollamaWriter{out: base}
	}
	w.WriteHeader(http.StatusOK)
	play(r.Context(), wr, turn)
	base.flush()
}

// httpFailure reports a turn that is an HTTP error status.
func httpFailure(turn []scripted.Item) (status int, code, msg string, ok bool) {
	for _, it := range turn {
		if it.Delay > 0 || it.Event.Type == agui.RunStarted {
			continue
		}
		if it.Event.Type != agui.RunError {
			return 0, "", "", false
		}
		st, err := strconv.Atoi(it.Event.Code)
		if err != nil || st < 400 || st > 599 {
			return 0, "", "", false
		}
		m := it.Event.Message
		if m == "" && it.Event.Error != nil {
			m = it.Event.Error.Message
		}
		return st, statusType(st), m, true
	}
	return 0, "", "", false
}

func statusType(st int) string {
	switch {
	case st == 429:
		return "rate_limit_error"
	case st == 401:
		return "authentication_error"
	case st == 529:
		return "overloaded_error"
	case st >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

func writeHTTPError(w http.ResponseWriter, api string, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	m := jstr(msg)
	switch api {
	case "anthropic":
		fmt.Fprintf(w, `{"type":"error","error":{"type":%s,"message":%s}}`, jstr(typ), m)
	case "gemini":
		fmt.Fprintf(w, `{"error":{"code":%d,"message":%s,"status":%s}}`, status, m, jstr(strings.ToUpper(typ)))
	case "ollama":
		fmt.Fprintf(w, `{"error":%s}`, m)
	default:
		fmt.Fprintf(w, `{"error":{"message":%s,"type":%s,"param":null,"code":null}}`, m, jstr(typ))
	}
}

func modelOf(body []byte) string {
	var v struct {
		Model string `json:"model"`
	}
	_ = jsonUnmarshal(body, &v)
	if v.Model == "" {
		return "mock-model"
	}
	return v.Model
}

// Main implements goai mock-provider.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mock-provider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	api := fs.String("api", "", "wire protocol: "+strings.Join(APIs, "|"))
	scenario := fs.String("scenario", "", "scenario file (scripted format)")
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	record := fs.String("record", "", "directory to record request bodies into (NNN.json)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ok := false
	for _, a := range APIs {
		ok = ok || a == *api
	}
	if !ok {
		fmt.Fprintf(stderr, "mock-provider: --api must be one of %s\n", strings.Join(APIs, ", "))
		return 2
	}
	if *scenario == "" {
		fmt.Fprintln(stderr, "mock-provider: --scenario is required")
		return 2
	}
	sc, err := scripted.LoadFile(*scenario)
	if err != nil {
		fmt.Fprintln(stderr, "mock-provider:", err)
		return 1
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "mock-provider:", err)
		return 1
	}
	srv := &http.Server{Handler: NewHandler(*api, sc, *record), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "http://%s%s\n", ln.Addr().String(), BasePath(*api))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return 0
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return 0
		}
		fmt.Fprintln(stderr, "mock-provider:", err)
		return 1
	}
}
