// Package wiretest holds the test helpers shared by the provider adapters:
// golden files of AG-UI events, deterministic ids, loopback servers, and a
// transport suite (HTTP errors, retries before the first byte only,
// cancellation, key redaction) every adapter runs.
package wiretest

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/internal/wire"
)

// Update rewrites golden files (go test ./provider/... -update).
var Update = flag.Bool("update", false, "rewrite golden files")

var idMu sync.Mutex

// Deterministic makes generated ids a counter for the test's duration.
// Tests that use it must not run in parallel with each other.
func Deterministic(t testing.TB) {
	t.Helper()
	idMu.Lock()
	var n atomic.Int64
	old := wire.NewID
	wire.NewID = func(prefix string) string { return fmt.Sprintf("%s_%d", prefix, n.Add(1)) }
	t.Cleanup(func() {
		wire.NewID = old
		idMu.Unlock()
	})
}

// Client returns an HTTP client whose idle connections are closed when the
// test ends (so goleak sees no persistent-connection goroutines).
func Client(t testing.TB) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// Options returns transport options for base with fast retries.
func Options(t testing.TB, base string) *wire.Options {
	return &wire.Options{BaseURL: base, APIKey: "sk-test-SECRET-123456", HTTPClient: Client(t),
		RetryBaseDelay: time.Millisecond, RetryMaxDelay: 5 * time.Millisecond}
}

// Key is the API key Options sets.
const Key = "sk-test-SECRET-123456"

// Collect drains seq. Timestamps are zeroed.
func Collect(t testing.TB, seq iter.Seq2[agui.Event, error]) []agui.Event {
	t.Helper()
	var out []agui.Event
	for ev, err := range seq {
		if err != nil {
			t.Fatalf("adapter returned an error: %v", err)
		}
		ev.Timestamp = 0
		out = append(out, ev)
	}
	return out
}

// Encode renders events one JSON object per line.
func Encode(evs []agui.Event) []byte {
	var b []byte
	for i := range evs {
		ev := evs[i]
		ev.Timestamp = 0
		b = agui.AppendJSON(b, &ev)
		b = append(b, '\n')
	}
	return b
}

// Golden compares got with the file at path (rewritten with -update).
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *Update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s mismatch:\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// Serve starts a server answering every request with status, content type
// and body; it returns its URL and a request counter.
func Serve(t testing.TB, contentType string, body []byte) (string, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// Types lists event types.
func Types(evs []agui.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = string(e.Type)
	}
	return out
}

// CheckGrammar asserts the adapter grammar: RUN_STARTED first, one
// terminal event last, text and reasoning closed before anything else
// starts, tool events only for started calls.
func CheckGrammar(t testing.TB, evs []agui.Event) {
	t.Helper()
	if len(evs) == 0 || evs[0].Type != agui.RunStarted {
		t.Fatalf("first event is not RUN_STARTED: %v", Types(evs))
	}
	last := evs[len(evs)-1]
	if !last.IsTerminal() {
		t.Fatalf("last event is not terminal: %v", Types(evs))
	}
	if last.Model == "" {
		t.Errorf("terminal event has no model")
	}
	textOpen, reasonOpen := "", ""
	toolsOpen := map[string]bool{}
	ended := false
	for i, e := range evs[1 : len(evs)-1] {
		switch e.Type {
		case agui.RunStarted, agui.RunFinished, agui.RunError:
			t.Fatalf("event %d: %s inside the turn", i+1, e.Type)
		case agui.TextMessageStart:
			if textOpen != "" || reasonOpen != "" {
				t.Fatalf("event %d: text starts while text %q / reasoning %q open", i+1, textOpen, reasonOpen)
			}
			textOpen = e.MessageID
		case agui.TextMessageContent:
			if textOpen != e.MessageID {
				t.Fatalf("event %d: content for %q, open %q", i+1, e.MessageID, textOpen)
			}
		case agui.TextMessageEnd:
			textOpen = ""
		case agui.ReasoningStart:
			if textOpen != "" {
				t.Fatalf("event %d: reasoning starts while text open", i+1)
			}
			reasonOpen = e.MessageID
		case agui.ReasoningEnd:
			reasonOpen = ""
		case agui.ToolCallStart:
			if toolsOpen[e.ToolCallID] {
				t.Fatalf("event %d: tool %q started twice", i+1, e.ToolCallID)
			}
			toolsOpen[e.ToolCallID] = true
		case agui.ToolCallArgs:
			if !toolsOpen[e.ToolCallID] {
				t.Fatalf("event %d: args for unopened tool %q", i+1, e.ToolCallID)
			}
		case agui.ToolCallEnd:
			if !toolsOpen[e.ToolCallID] {
				t.Fatalf("event %d: end for unopened tool %q", i+1, e.ToolCallID)
			}
			toolsOpen[e.ToolCallID] = false
			ended = true
		}
	}
	if last.Type == agui.RunFinished {
		if textOpen != "" || reasonOpen != "" {
			t.Errorf("RUN_FINISHED with text %q / reasoning %q open", textOpen, reasonOpen)
		}
		if last.FinishReason == agui.FinishToolCalls && !ended {
			t.Errorf("finishReason tool_calls without a completed call")
		}
	}
}

// Req is a minimal request.
func Req() *chat.Request {
	return &chat.Request{ThreadID: "thread-1", RunID: "run-1",
		Messages: []agui.ModelMessage{{Role: agui.RoleUser, Content: agui.Text("What is the weather in Paris and Tokyo?")}}}
}

// NoKey fails if any event mentions the API key.
func NoKey(t testing.TB, evs []agui.Event) {
	t.Helper()
	if strings.Contains(string(Encode(evs)), Key) {
		t.Fatalf("API key leaked into events")
	}
}

// Ctx returns a context cancelled at test end.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// GoldenDir runs every testdata/<dir>/*.<ext> fixture through the adapter
// mk builds (served byte for byte on loopback) and compares the events with
// the fixture's .golden.jsonl.
func GoldenDir(t *testing.T, dir, ext, contentType string, mk func(o *wire.Options) chat.Adapter) {
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*."+ext))
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), "."+ext)
		t.Run(name, func(t *testing.T) {
			Deterministic(t)
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			url, n := Serve(t, contentType, body)
			evs := Collect(t, mk(Options(t, url)).ChatStream(Ctx(t), Req()))
			CheckGrammar(t, evs)
			NoKey(t, evs)
			if n.Load() != 1 {
				t.Fatalf("%d requests", n.Load())
			}
			Golden(t, strings.TrimSuffix(f, "."+ext)+".golden.jsonl", Encode(evs))
		})
	}
}

// Payloads splits an SSE fixture into its data payloads, or an NDJSON
// fixture into lines.
func Payloads(data []byte, sse bool) [][]byte {
	var out [][]byte
	for _, ln := range bytes.Split(data, []byte("\n")) {
		if !sse {
			if len(bytes.TrimSpace(ln)) > 0 {
				out = append(out, ln)
			}
			continue
		}
		if p, ok := bytes.CutPrefix(ln, []byte("data: ")); ok {
			out = append(out, p)
		} else if p, ok := bytes.CutPrefix(ln, []byte("data:")); ok {
			out = append(out, p)
		}
	}
	return out
}

// BenchFeed measures feeding every payload of a fixture through a parser
// (decode and translation, events discarded) and reports ns/chunk.
func BenchFeed(b *testing.B, data []byte, sse bool, mk func(em *wire.Emitter) wire.Parser) {
	payloads := Payloads(data, sse)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	defer func() {
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(max(n, 1)), "allocs/chunk")
	}()
	for b.Loop() {
		em := wire.NewEmitter(func(agui.Event, error) bool { return true }, &chat.Request{RunID: "r"}, "m")
		parser := mk(em)
		for _, p := range payloads {
			if err := parser.Feed(p); err != nil {
				b.Fatal(err)
			}
		}
		n += len(payloads)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/chunk")
}

// FuzzSeeds adds every payload of the fixtures in testdata/<dir>.
func FuzzSeeds(f *testing.F, dir, ext string, sse bool) {
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*."+ext))
	for _, p := range files {
		data, _ := os.ReadFile(p)
		for _, d := range Payloads(data, sse) {
			f.Add(d)
		}
	}
}

// NewEmitter returns an emitter that discards events.
func NewEmitter() *wire.Emitter {
	return wire.NewEmitter(func(agui.Event, error) bool { return true }, &chat.Request{RunID: "r"}, "m")
}

// BenchStream measures SSE framing plus parsing over a whole fixture and
// reports ns/chunk.
func BenchStream(b *testing.B, data []byte, mk func(em *wire.Emitter) wire.Parser) {
	chunks := len(Payloads(data, true))
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	n := 0
	for b.Loop() {
		parser := mk(NewEmitter())
		r := wire.NewSSEReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			_, d, err := r.Next()
			if err != nil {
				break
			}
			if err := parser.Feed(d); err != nil {
				b.Fatal(err)
			}
		}
		n += chunks
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/chunk")
}

// FuzzGrammar feeds every line of data (a payload per line) to the parser
// mk builds, ends the turn as the adapter would at EOF, and checks the
// events still follow the adapter grammar.
func FuzzGrammar(t *testing.T, data []byte, mk func(em *wire.Emitter) wire.Parser) {
	var evs []agui.Event
	em := wire.NewEmitter(func(ev agui.Event, _ error) bool { evs = append(evs, ev); return true }, &chat.Request{RunID: "r"}, "m")
	em.Start()
	parser := mk(em)
	for _, ln := range bytes.Split(data, []byte("\n")) {
		if em.Done() {
			break
		}
		if err := parser.Feed(ln); err != nil {
			em.Fail("invalid_response", err.Error(), nil)
		}
	}
	if !em.Done() {
		parser.End()
	}
	if !em.Done() {
		em.Incomplete(nil)
	}
	CheckGrammar(t, evs)
}

// FuzzSeedsWhole adds each fixture of testdata/<dir> as one input holding
// its payloads one per line.
func FuzzSeedsWhole(f *testing.F, dir, ext string, sse bool) {
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*."+ext))
	for _, p := range files {
		data, _ := os.ReadFile(p)
		f.Add(bytes.Join(Payloads(data, sse), []byte("\n")))
	}
}
