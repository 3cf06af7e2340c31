package server_test

// Named tests for the producer-sink, transport and driver behaviours of
// docs/durable.md §8 (items 15-27 and 40); items 1-14 and 29-36 are the storage
// conformance suites in durable/durabletest, run by every backend.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/server"
)

type itemEnv struct {
	srv   *httptest.Server
	h     *server.Handler
	store durable.Store
}

// newItemEnv serves adapter durably over store; mod adjusts the config.
func newItemEnv(t *testing.T, store durable.Store, adapter chat.Adapter, mod func(*server.Config), mws ...*chat.Middleware) *itemEnv {
	t.Helper()
	cfg := server.Config{
		Options: func(*server.Request) (chat.Options, error) {
			return chat.Options{Adapter: adapter, Middleware: mws, Debug: chat.DebugNone()}, nil
		},
		Store:      store,
		CancelPoll: 20 * time.Millisecond,
		// Any stream that waits is taken over from net/http, so that the
		// tests read taken-over connections as often as net/http's.
		ReleaseIdleAfter: time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	e := &itemEnv{h: server.ChatHandler(cfg), store: store}
	mux := http.NewServeMux()
	mux.Handle("/api/chat", e.h)
	mux.Handle("/api/chat/cancel", e.h)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		// The handler's taken-over streams end before the test server
		// closes: a connection handed back to it while its Close waits
		// would race with that wait.
		e.h.StopAll(context.Canceled)
		e.h.Wait()
		e.h.Shutdown(t.Context())
		e.srv.Close()
	})
	return e
}

func (e *itemEnv) url() string { return e.srv.URL + "/api/chat" }

// logEvents decodes a run's stored log.
func logEvents(t *testing.T, s durable.Store, run string) []agui.Event {
	t.Helper()
	es, err := s.Snapshot(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]agui.Event, len(es))
	for i, e := range es {
		out[i] = decode(t, e.Data)
	}
	return out
}

// logClosed reports whether a from-start read of run ends on its own
// within d (a closed log), rather than parking (an open one).
func logClosed(t *testing.T, s durable.Store, run string, d time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for _, err := range s.Read(ctx, run, durable.FromStart) {
		if err != nil {
			t.Fatalf("reading %s: %v", run, err)
		}
	}
	return ctx.Err() == nil
}

func countTerminals(evs []agui.Event) (finished, errs int) {
	for _, e := range evs {
		switch e.Type {
		case agui.RunFinished:
			finished++
		case agui.RunError:
			errs++
		}
	}
	return
}

func mustRecord(t *testing.T, s durable.Store, run string) durable.RunRecord {
	t.Helper()
	rec, err := s.Get(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// recStore records appends and closes, and can fail Close.
type recStore struct {
	*durable.Memory
	mu        sync.Mutex
	batches   [][]agui.Event
	closes    map[string]int
	failClose bool
}

func newRecStore() *recStore {
	return &recStore{Memory: durable.NewMemory(nil), closes: map[string]int{}}
}

func (s *recStore) record(batch [][]byte) {
	var evs []agui.Event
	for _, b := range batch {
		var e agui.Event
		_ = json.Unmarshal(b, &e)
		evs = append(evs, e)
	}
	s.mu.Lock()
	s.batches = append(s.batches, evs)
	s.mu.Unlock()
}

func (s *recStore) Append(ctx context.Context, run string, batch [][]byte) ([]string, error) {
	s.record(batch)
	return s.Memory.Append(ctx, run, batch)
}

func (s *recStore) AppendWith(ctx context.Context, run string, batch [][]byte, o durable.AppendOptions) ([]string, error) {
	s.record(batch)
	return s.Memory.AppendWith(ctx, run, batch, o)
}

func (s *recStore) Close(ctx context.Context, run string) error {
	s.mu.Lock()
	s.closes[run]++
	fail := s.failClose
	s.mu.Unlock()
	if fail {
		return errors.New("close failed: disk on fire")
	}
	return s.Memory.Close(ctx, run)
}

// failingAdapter streams a little, then fails.
type failingAdapter struct{ calls atomic.Int32 }

func (*failingAdapter) Name() string  { return "failing" }
func (*failingAdapter) Model() string { return "m" }
func (a *failingAdapter) ChatStream(ctx context.Context, _ *chat.Request) iter.Seq2[agui.Event, error] {
	a.calls.Add(1)
	return func(yield func(agui.Event, error) bool) {
		for _, e := range []agui.Event{
			{Type: agui.RunStarted, ThreadID: "t1", RunID: "r1"},
			{Type: agui.TextMessageStart, MessageID: "m1", Role: "assistant"},
			{Type: agui.TextMessageContent, MessageID: "m1", Delta: "partial"},
		} {
			if !yield(e, nil) {
				return
			}
		}
		yield(agui.Event{}, errors.New("upstream exploded: 503"))
	}
}

// readUntil reads SSE frames until stop says so or the body ends.
func readUntil(t *testing.T, r io.Reader, stop func(agui.Frame) bool) []agui.Frame {
	t.Helper()
	var out []agui.Frame
	for f, err := range agui.ReadSSE(bufio.NewReader(r)) {
		if err != nil {
			return out
		}
		out = append(out, f)
		if stop != nil && stop(f) {
			return out
		}
	}
	return out
}

func TestItem15RunAcceptedBeforeFirstSourceChunkNeverOnResume(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			e := newItemEnv(t, newStore(t), scripted.New(slowScenario(t, 3, 0)), nil)
			res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1"}, body)
			fs := frames(t, res.Body)
			res.Body.Close()
			accepted, firstSource := -1, -1
			for i, f := range fs {
				if f.Event.Name == server.RunAcceptedEvent && accepted < 0 {
					accepted = i
				}
				if f.Event.Type != agui.RunStarted && f.Event.Type != agui.Custom && firstSource < 0 {
					firstSource = i
				}
			}
			// RUN_STARTED (the agui profile's first event) may precede it.
			if accepted < 0 || accepted > 1 || firstSource < accepted {
				t.Fatalf("run.accepted at %d, first source chunk at %d", accepted, firstSource)
			}
			e.h.Wait()
			count := func() int {
				n := 0
				for _, ev := range logEvents(t, e.store, "r1") {
					if ev.Name == server.RunAcceptedEvent {
						n++
					}
				}
				return n
			}
			if n := count(); n != 1 {
				t.Fatalf("%d run.accepted markers stored", n)
			}
			// A resume re-POST and a join are readers: no new marker.
			res = post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1", "Last-Event-ID": fs[accepted].ID}, body)
			rest := frames(t, res.Body)
			res.Body.Close()
			for _, f := range rest {
				if f.Event.Name == server.RunAcceptedEvent {
					t.Fatal("a resume served a second run.accepted")
				}
			}
			if len(rest) != len(fs)-accepted-1 {
				t.Fatalf("resume served %d frames, want %d", len(rest), len(fs)-accepted-1)
			}
			if n := count(); n != 1 {
				t.Fatalf("after the resume %d run.accepted markers are stored", n)
			}
		})
	}
}

func TestItem16ForwardedChunksAreStoredAndTagged(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			e := newItemEnv(t, store, scripted.New(slowScenario(t, 4, 5)), nil)
			res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1"}, body)
			n := 0
			for f, err := range agui.ReadSSE(bufio.NewReader(res.Body)) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				if f.ID == "" {
					t.Fatalf("durable frame %s has no id", f.Event.Type)
				}
				// Already stored when it reaches the client, under its id.
				snap, err := store.Snapshot(context.Background(), "r1")
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, en := range snap {
					if en.Offset == f.ID {
						found = bytes.Equal(en.Data, f.Data)
						break
					}
				}
				if !found {
					t.Fatalf("frame %s id %s is not stored as delivered", f.Event.Type, f.ID)
				}
			}
			res.Body.Close()
			if n < 8 {
				t.Fatalf("only %d frames", n)
			}

			// NDJSON: {"id","chunk"} envelopes, never a top-level type.
			res = post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r2", "Accept": "application/x-ndjson"}, body)
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			snap, _ := store.Snapshot(context.Background(), "r2")
			lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
			if len(lines) != len(snap) {
				t.Fatalf("%d NDJSON lines, %d stored entries", len(lines), len(snap))
			}
			for i, l := range lines {
				var env map[string]json.RawMessage
				if err := json.Unmarshal([]byte(l), &env); err != nil {
					t.Fatal(err)
				}
				var id string
				_ = json.Unmarshal(env["id"], &id)
				if _, bare := env["type"]; bare || id != snap[i].Offset || !bytes.Equal(env["chunk"], snap[i].Data) {
					t.Fatalf("NDJSON line %d %s, stored %s %s", i, l, snap[i].Offset, snap[i].Data)
				}
			}

			// Without X-Run-Id the stream is not durable and not tagged.
			res = post(t, context.Background(), e.url(), nil, strings.Replace(body, `"r1"`, `"r3"`, 1))
			raw, _ = io.ReadAll(res.Body)
			res.Body.Close()
			if bytes.Contains(raw, []byte("id:")) || !bytes.Contains(raw, []byte("data: ")) {
				t.Fatalf("non-durable SSE: %s", raw)
			}
			if snap, _ := store.Snapshot(context.Background(), "r3"); len(snap) != 0 {
				t.Fatal("a non-durable run was logged")
			}
		})
	}
}

// Item 17 (how a producer batches its appends) is a group commit in goai:
// see TestGroupCommit* in groupcommit_test.go.

// offsetStore serves its log with mangled offsets, in batches or entry by
// entry.
type offsetStore struct {
	*durable.Memory
	mangle func(i int, off string) string
}

func (s *offsetStore) ReadBatches(ctx context.Context, run, after string) iter.Seq2[[]durable.Entry, error] {
	return func(yield func([]durable.Entry, error) bool) {
		i := 0
		for es, err := range s.Memory.ReadBatches(ctx, run, after) {
			if err == nil {
				es = slices.Clone(es)
				for j := range es {
					es[j].Offset = s.mangle(i, es[j].Offset)
					i++
				}
			}
			if !yield(es, err) {
				return
			}
		}
	}
}

// entryStore hides its store's batched read: the handler reads it entry by
// entry.
type entryStore struct{ durable.Store }

func (s *offsetStore) Read(ctx context.Context, run, after string) iter.Seq2[durable.Entry, error] {
	return func(yield func(durable.Entry, error) bool) {
		i := 0
		for e, err := range s.Memory.Read(ctx, run, after) {
			if err == nil {
				e.Offset = s.mangle(i, e.Offset)
				i++
			}
			if !yield(e, err) {
				return
			}
		}
	}
}

func TestItem18InvalidOrRepeatedOffsetFailsTheResponse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mangle func(i int, off string) string
		frames int // frames served before the failure; -1: an error status
	}{
		{"empty", func(i int, o string) string { return "" }, -1},
		{"NUL", func(i int, o string) string { return o + "\x00" }, -1},
		{"CR", func(i int, o string) string { return o + "\rx" }, -1},
		{"LF", func(i int, o string) string { return "x\n" + o }, -1},
		{"padded", func(i int, o string) string { return " " + o }, -1},
		// The log's second entry carries the first's offset, in every read
		// of it (a read may resume after the first entry).
		{"repeated", func(i int, o string) string {
			if second, ok := strings.CutSuffix(o, ":2"); ok {
				return second + ":1"
			}
			return o
		}, 1},
	} {
		for _, batched := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/batched=%v", tc.name, batched), func(t *testing.T) {
				s := &offsetStore{Memory: durable.NewMemory(nil), mangle: tc.mangle}
				var store durable.Store = s
				if !batched {
					store = entryStore{s}
				}
				ctx := context.Background()
				if _, err := s.Append(ctx, "r1", [][]byte{[]byte(`{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`),
					[]byte(`{"type":"CUSTOM","name":"x","value":1}`), []byte(`{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}`)}); err != nil {
					t.Fatal(err)
				}
				_ = s.Close(ctx, "r1")
				e := newItemEnv(t, store, scripted.New(slowScenario(t, 1, 0)), nil)
				res, err := http.Get(e.url() + "?runId=r1&offset=-1")
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if tc.frames < 0 {
					if res.StatusCode < 400 || bytes.Contains(raw, []byte("data: ")) {
						t.Fatalf("status %d body %q", res.StatusCode, raw)
					}
					return
				}
				fs := frames(t, bytes.NewReader(raw))
				if res.StatusCode != 200 || len(fs) != tc.frames {
					t.Fatalf("status %d, %d frames, want %d: %q", res.StatusCode, len(fs), tc.frames, raw)
				}
			})
		}
	}
}

func TestItem19ResumeNeverPullsTheProducerSource(t *testing.T) {
	adapter := scripted.New(slowScenario(t, 5, 0))
	e := newItemEnv(t, durable.NewMemory(nil), adapter, nil)
	res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1"}, body)
	fs := frames(t, res.Body)
	res.Body.Close()
	e.h.Wait()
	for i := range 3 {
		res = post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1", "Last-Event-ID": fs[i].ID}, body)
		rest := frames(t, res.Body)
		res.Body.Close()
		if len(rest) != len(fs)-i-1 || rest[0].ID != fs[i+1].ID {
			t.Fatalf("resume after %d served %d frames", i, len(rest))
		}
	}
	// A resume of a run that never ran starts nothing either.
	res = post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "ghost", "Last-Event-ID": durable.FromStart}, body)
	res.Body.Close()
	e.h.Wait()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("resume of an unknown run: %d", res.StatusCode)
	}
	if n := len(adapter.Calls()); n != 1 {
		t.Fatalf("model called %d times", n)
	}
	if _, err := e.store.Get(context.Background(), "ghost"); !errors.Is(err, durable.ErrRunNotFound) {
		t.Fatalf("a resume created a record: %v", err)
	}
}

func TestItem20ResumeOffsetAndRunIDPrecedence(t *testing.T) {
	e := newItemEnv(t, durable.NewMemory(nil), scripted.New(slowScenario(t, 3, 0)), nil)
	res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1"}, body)
	fs := frames(t, res.Body)
	res.Body.Close()
	e.h.Wait()
	get := func(q string, hdr map[string]string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodGet, e.url()+q, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	code, b := get("?runId=r1", nil)
	var msg struct{ Error string }
	_ = json.Unmarshal(b, &msg)
	if code != 400 || msg.Error != server.NoResumeOffset {
		t.Fatalf("no offset: %d %s", code, b)
	}
	// Last-Event-ID beats ?offset.
	_, b = get("?runId=r1&offset=-1", map[string]string{"Last-Event-ID": fs[2].ID})
	if got := frames(t, bytes.NewReader(b)); len(got) != len(fs)-3 || got[0].ID != fs[3].ID {
		t.Fatalf("Last-Event-ID lost to ?offset: %d frames", len(got))
	}
	// X-Run-Id beats ?runId.
	code, b = get("?runId=ghost&offset=-1", map[string]string{"X-Run-Id": "r1"})
	if got := frames(t, bytes.NewReader(b)); code != 200 || len(got) != len(fs) {
		t.Fatalf("X-Run-Id lost to ?runId: %d, %d frames", code, len(got))
	}
}

func TestItem21SourceErrorStoresOneRunErrorAndClosesBeforeTheResponseEnds(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			e := newItemEnv(t, store, &failingAdapter{}, nil)
			res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1"}, body)
			fs := frames(t, res.Body) // ends only once the log is closed
			res.Body.Close()
			last := fs[len(fs)-1].Event
			if last.Type != agui.RunError || !strings.Contains(last.Message, "upstream exploded: 503") {
				t.Fatalf("live stream ends %s %q", last.Type, last.Message)
			}
			if !logClosed(t, store, "r1", 5*time.Second) {
				t.Fatal("log left open")
			}
			evs := logEvents(t, store, "r1")
			if fin, errs := countTerminals(evs); errs != 1 || fin != 0 || evs[len(evs)-1].Type != agui.RunError {
				t.Fatalf("stored %d RUN_FINISHED, %d RUN_ERROR, last %s", fin, errs, evs[len(evs)-1].Type)
			}
			e.h.Wait()
			rec := mustRecord(t, store, "r1")
			if rec.Status != durable.StatusFailed || rec.Error == nil || !strings.Contains(rec.Error.Message, "upstream exploded: 503") {
				t.Fatalf("record %+v", rec)
			}
		})
	}
}

func TestItem22ClientCancelLeavesTheProducerRunning(t *testing.T) {
	s := newRecStore()
	e := newItemEnv(t, s, scripted.New(slowScenario(t, 10, 10)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	res := post(t, ctx, e.url(), map[string]string{"X-Run-Id": "r1"}, body)
	got := readUntil(t, res.Body, func(f agui.Frame) bool { return f.Event.Type == agui.TextMessageContent })
	cancel()
	res.Body.Close()
	if len(got) == 0 {
		t.Fatal("no frames before the cut")
	}
	e.h.Wait()
	evs := logEvents(t, s, "r1")
	fin, errs := countTerminals(evs)
	text := ""
	for _, ev := range evs {
		if ev.Type == agui.TextMessageContent {
			text += ev.Delta
		}
	}
	if errs != 0 || fin != 1 || evs[len(evs)-1].Type != agui.RunFinished || text != "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 " {
		t.Fatalf("log after a client cut: %d RUN_FINISHED, %d RUN_ERROR, last %s, text %q", fin, errs, evs[len(evs)-1].Type, text)
	}
	s.mu.Lock()
	closes := s.closes["r1"]
	s.mu.Unlock()
	if closes != 1 || !logClosed(t, s, "r1", 5*time.Second) {
		t.Fatalf("log closed %d times", closes)
	}
	if rec := mustRecord(t, s, "r1"); rec.Status != durable.StatusCompleted {
		t.Fatalf("record %s", rec.Status)
	}
}

func TestItem23DisconnectNotifiedOnceAndLateSubscriberCalledAtOnce(t *testing.T) {
	var early, late atomic.Int32
	earlyFired := make(chan struct{})
	var lateSubscribed atomic.Bool
	mw := &chat.Middleware{Name: "listeners", Setup: func(c *chat.Context) error {
		d, err := chat.RunDisconnectCapability.Get(c)
		if err != nil {
			return err
		}
		d.Subscribe(func(context.Context) error {
			if early.Add(1) == 1 {
				close(earlyFired)
			}
			return nil
		})
		select {
		case <-earlyFired:
		case <-time.After(10 * time.Second):
			return errors.New("no disconnect notification")
		}
		// Subscribing after the disconnect calls the listener at once.
		d.Subscribe(func(context.Context) error { late.Add(1); return nil })
		lateSubscribed.Store(true)
		return nil
	}}
	e := newItemEnv(t, durable.NewMemory(nil), scripted.New(slowScenario(t, 30, 10)), nil, mw)
	ctx, cancel := context.WithCancel(context.Background())
	res := post(t, ctx, e.url(), map[string]string{"X-Run-Id": "r1"}, body)
	fs := readUntil(t, res.Body, func(f agui.Frame) bool { return f.Event.Name == server.RunAcceptedEvent })
	cancel()
	res.Body.Close()
	// Cut again and again: a resume and a join are readers, not the run's
	// transport, and never notify.
	for i := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		var res *http.Response
		if i == 0 {
			res = post(t, ctx, e.url(), map[string]string{"X-Run-Id": "r1", "Last-Event-ID": fs[0].ID}, body)
		} else {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url()+"?runId=r1&offset=-1", nil)
			var err error
			if res, err = http.DefaultClient.Do(req); err != nil {
				t.Fatal(err)
			}
		}
		readUntil(t, res.Body, func(agui.Frame) bool { return true })
		cancel()
		res.Body.Close()
	}
	e.h.Wait()
	if early.Load() != 1 || late.Load() != 1 || !lateSubscribed.Load() {
		t.Fatalf("early listener called %d times, late %d", early.Load(), late.Load())
	}
	if evs := logEvents(t, e.store, "r1"); evs[len(evs)-1].Type != agui.RunFinished {
		t.Fatalf("run ends %s", evs[len(evs)-1].Type)
	}
}

// detachScenario pauses on a server tool call (an intermediate
// RUN_FINISHED) and then streams slowly.
func detachScenario(t *testing.T) *scripted.Scenario {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"name":"detach","turns":[[{"type":"RUN_STARTED","threadId":"t1","runId":"r1"},
	 {"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"echo","index":0},
	 {"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"text\":\"x\"}"},
	 {"type":"TOOL_CALL_END","toolCallId":"c1"},
	 {"type":"RUN_FINISHED","threadId":"t1","runId":"r1","finishReason":"tool_calls"}],
	 [{"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"}`)
	for i := range 300 {
		b.WriteString(`,{"delayMs":10},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"w` + itoa(i) + ` "}`)
	}
	b.WriteString(`,{"type":"TEXT_MESSAGE_END","messageId":"m2"},{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","finishReason":"stop"}]]}`)
	sc, err := scripted.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// startDetached starts r1 with a middleware that records a detach verdict
// on the run record when the client goes away (as WithSandbox does), cuts
// the client once the second turn streams, and waits for the verdict.
func startDetached(t *testing.T, store durable.Store) *itemEnv {
	t.Helper()
	recorded := make(chan struct{})
	mw := &chat.Middleware{Name: "detach", Setup: func(c *chat.Context) error {
		d, err := chat.RunDisconnectCapability.Get(c)
		if err != nil {
			return err
		}
		runID := c.RunID
		d.Subscribe(func(ctx context.Context) error {
			defer close(recorded)
			return store.Update(ctx, runID, durable.RunPatch{DetachedSince: durable.Set(time.Now()), SandboxKey: durable.Set("sb-1")})
		})
		return nil
	}}
	tools, err := (&scripted.Catalogue{}).Tools([]string{"echo"})
	if err != nil {
		t.Fatal(err)
	}
	adapter := scripted.New(detachScenario(t))
	e := newItemEnv(t, store, adapter, func(c *server.Config) {
		c.Options = func(*server.Request) (chat.Options, error) {
			return chat.Options{Adapter: adapter, Tools: tools, Middleware: []*chat.Middleware{mw}, Debug: chat.DebugNone()}, nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	res := post(t, ctx, e.url(), map[string]string{"X-Run-Id": "r1"}, body)
	readUntil(t, res.Body, func(f agui.Frame) bool { return f.Event.Type == agui.TextMessageContent })
	cancel()
	res.Body.Close()
	select {
	case <-recorded:
	case <-time.After(10 * time.Second):
		t.Fatal("no detach recorded")
	}
	if rec := mustRecord(t, store, "r1"); rec.DetachedSince == nil || rec.Status != durable.StatusRunning {
		t.Fatalf("record after the detach %+v", rec)
	}
	return e
}

func TestItem24DetachedProducerAbortLeavesTheLogOpen(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			e := startDetached(t, store)
			e.h.StopAll(errors.New("server shutting down"))
			e.h.Wait()
			evs := logEvents(t, store, "r1")
			if fin, errs := countTerminals(evs); fin != 0 || errs != 0 {
				t.Fatalf("a detached abort stored %d RUN_FINISHED, %d RUN_ERROR", fin, errs)
			}
			turnDone := false
			for _, ev := range evs {
				turnDone = turnDone || ev.Name == agui.TurnFinishedEvent
			}
			if !turnDone {
				t.Fatal("the intermediate RUN_FINISHED (turn.finished) is not stored")
			}
			if logClosed(t, store, "r1", 300*time.Millisecond) {
				t.Fatal("a detached abort closed the log")
			}
			if rec := mustRecord(t, store, "r1"); rec.Status != durable.StatusRunning || rec.DetachedSince == nil || rec.FinishedAt != nil {
				t.Fatalf("record %+v", rec)
			}
		})
	}
}

func TestItem25CancelAlwaysEndsWithRunErrorAndClosedLog(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			e := startDetached(t, store) // a detach verdict is recorded
			c := post(t, context.Background(), e.srv.URL+"/api/chat/cancel", nil, `{"runId":"r1"}`)
			c.Body.Close()
			if c.StatusCode != 200 {
				t.Fatalf("cancel: %d", c.StatusCode)
			}
			e.h.Wait()
			evs := logEvents(t, store, "r1")
			last := evs[len(evs)-1]
			if _, errs := countTerminals(evs); errs != 1 || last.Type != agui.RunError || last.Code != "cancelled" {
				t.Fatalf("log ends %s %q with %d RUN_ERROR", last.Type, last.Code, errs)
			}
			if !logClosed(t, store, "r1", 5*time.Second) {
				t.Fatal("a cancelled run's log is open")
			}
			if rec := mustRecord(t, store, "r1"); rec.Status != durable.StatusAborted || rec.FinishedAt == nil {
				t.Fatalf("record %+v", rec)
			}
			if h := hydrate(t, e.srv.URL, "t1"); h.ActiveRun != nil || len(h.Messages) == 0 || h.Messages[0].ID != "u1" {
				t.Fatalf("hydrating the cancelled run's thread: %+v", h)
			}
		})
	}
}

func TestItem26AbortStoresBufferedChunksBeforeTheTerminal(t *testing.T) {
	var seen atomic.Int32
	counter := &chat.Middleware{Name: "count", OnChunk: func(_ *chat.Context, ev *agui.Event) (chat.ChunkAction, error) {
		if ev.Type == agui.TextMessageContent {
			seen.Add(1)
		}
		return chat.Pass, nil
	}}
	store := durable.NewMemory(nil)
	e := newItemEnv(t, store, scripted.New(slowScenario(t, 300, 5)), func(c *server.Config) { c.Linger = time.Hour }, counter)
	res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1"}, body)
	defer res.Body.Close()
	go io.Copy(io.Discard, res.Body)
	deadline := time.Now().Add(10 * time.Second)
	for seen.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// Still lingering: only run.accepted (flushed at accept) stored so far.
	if n := len(logEvents(t, store, "r1")); n > 3 {
		t.Fatalf("%d entries stored before the abort with an hour of linger", n)
	}
	c := post(t, context.Background(), e.srv.URL+"/api/chat/cancel", nil, `{"runId":"r1"}`)
	c.Body.Close()
	e.h.Wait()
	evs := logEvents(t, store, "r1")
	var deltas []string
	for _, ev := range evs {
		if ev.Type == agui.TextMessageContent {
			deltas = append(deltas, ev.Delta)
		}
	}
	if len(deltas) < 5 || evs[len(evs)-1].Type != agui.RunError {
		t.Fatalf("%d deltas stored, last %s", len(deltas), evs[len(evs)-1].Type)
	}
	for i, d := range deltas {
		if d != "w"+itoa(i)+" " {
			t.Fatalf("delta %d is %q", i, d)
		}
	}
}

func TestItem27CloseFailureAddsNoSecondTerminal(t *testing.T) {
	s := newRecStore()
	s.failClose = true
	e := newItemEnv(t, s, scripted.New(slowScenario(t, 3, 0)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	res := post(t, ctx, e.url(), map[string]string{"X-Run-Id": "r1"}, body)
	// The log never closes, so stop reading at the terminal.
	got := readUntil(t, res.Body, func(f agui.Frame) bool { return f.Event.Type == agui.RunFinished })
	cancel()
	res.Body.Close()
	e.h.Wait()
	if got[len(got)-1].Event.Type != agui.RunFinished {
		t.Fatalf("live stream ends %s", got[len(got)-1].Event.Type)
	}
	evs := logEvents(t, s, "r1")
	if fin, errs := countTerminals(evs); fin != 1 || errs != 0 || evs[len(evs)-1].Type != agui.RunFinished {
		t.Fatalf("after a failed Close the log holds %d RUN_FINISHED, %d RUN_ERROR", fin, errs)
	}
	s.mu.Lock()
	tries := s.closes["r1"]
	s.mu.Unlock()
	if tries < 2 {
		t.Fatalf("Close tried %d times; a failed close is retried", tries)
	}
}

// A transient Close failure is retried, so readers are not stranded.
func TestItem27TransientCloseFailureIsRetried(t *testing.T) {
	s := &flakyCloseStore{Memory: durable.NewMemory(nil)}
	e := newItemEnv(t, s, scripted.New(slowScenario(t, 3, 0)), nil)
	res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1"}, body)
	fs := readAllWithin(t, res, 10*time.Second) // ends only once the log is closed
	if fs[len(fs)-1].Event.Type != agui.RunFinished {
		t.Fatalf("stream ends %s", fs[len(fs)-1].Event.Type)
	}
	e.h.Wait()
	if fin, errs := countTerminals(logEvents(t, s, "r1")); fin != 1 || errs != 0 {
		t.Fatalf("%d RUN_FINISHED, %d RUN_ERROR", fin, errs)
	}
}

// flakyCloseStore fails the first Close.
type flakyCloseStore struct {
	*durable.Memory
	failed atomic.Bool
}

func (s *flakyCloseStore) Close(ctx context.Context, run string) error {
	if s.failed.CompareAndSwap(false, true) {
		return errors.New("transient: connection reset")
	}
	return s.Memory.Close(ctx, run)
}

// Item 40 in goai's terms: the producer (pipeToRunLog's counterpart) ends
// the record completed, failed (source error) or aborted (cancel), and
// always closes the log.
func TestItem40ProducerRecordsTheOutcomeAndAlwaysCloses(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				run     string
				adapter chat.Adapter
				cancel  bool
				want    durable.RunStatus
			}{
				{"ok", scripted.New(slowScenario(t, 2, 0)), false, durable.StatusCompleted},
				{"boom", &failingAdapter{}, false, durable.StatusFailed},
				{"stop", scripted.New(slowScenario(t, 300, 10)), true, durable.StatusAborted},
			} {
				store := newStore(t)
				e := newItemEnv(t, store, tc.adapter, nil)
				b := strings.Replace(body, `"r1"`, `"`+tc.run+`"`, 1)
				res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": tc.run}, b)
				if tc.cancel {
					readUntil(t, res.Body, func(f agui.Frame) bool { return f.Event.Type == agui.TextMessageContent })
					c := post(t, context.Background(), e.srv.URL+"/api/chat/cancel", nil, `{"runId":"`+tc.run+`"}`)
					c.Body.Close()
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				e.h.Wait()
				rec := mustRecord(t, store, tc.run)
				if rec.Status != tc.want || rec.FinishedAt == nil || (tc.want == durable.StatusCompleted) != (rec.Error == nil) {
					t.Fatalf("%s: record %+v", tc.run, rec)
				}
				if !logClosed(t, store, tc.run, 5*time.Second) {
					t.Fatalf("%s: log open", tc.run)
				}
			}
		})
	}
}

// Item 39 in goai's terms: goai has no resume driver (a resume only ever
// serves the log, item 19); the nearest path that could drive a run is a
// fresh POST of a run id that already has a record. For an ended, paused
// or cancel-requested run it serves the log and never calls the model.
func TestItem39RePostOfEndedPausedOrCancelledRunDrivesNothing(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			sc, err := scripted.Parse([]byte(pickScenario))
			if err != nil {
				t.Fatal(err)
			}
			tools, _ := (&scripted.Catalogue{}).Tools([]string{"client_pick"})
			adapter := scripted.New(sc)
			e := newItemEnv(t, store, adapter, func(c *server.Config) {
				c.Options = func(*server.Request) (chat.Options, error) {
					return chat.Options{Adapter: adapter, Tools: tools, Debug: chat.DebugNone()}, nil
				}
			})
			// r1 pauses on an interrupt.
			res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1"}, body)
			first := frames(t, res.Body)
			res.Body.Close()
			e.h.Wait()
			// r2 is running per its record, with a cancel recorded and a
			// claim taken (a producer elsewhere).
			ctx := context.Background()
			if _, err := store.CreateOrResume(ctx, durable.RunRecord{RunID: "r2", ThreadID: "t1", StartedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if err := store.Update(ctx, "r2", durable.RunPatch{CancelRequested: durable.Set(true)}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Claim(ctx, "r2"); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Append(ctx, "r2", [][]byte{[]byte(`{"type":"RUN_STARTED","threadId":"t1","runId":"r2"}`)}); err != nil {
				t.Fatal(err)
			}
			if err := store.Close(ctx, "r2"); err != nil {
				t.Fatal(err)
			}
			// r3 ended.
			if _, err := store.CreateOrResume(ctx, durable.RunRecord{RunID: "r3", ThreadID: "t1", StartedAt: time.Now(), Status: durable.StatusCompleted}); err != nil {
				t.Fatal(err)
			}
			if err := store.Close(ctx, "r3"); err != nil {
				t.Fatal(err)
			}
			for run, want := range map[string]int{"r1": len(first), "r2": 1, "r3": 0} {
				b := strings.Replace(body, `"r1"`, `"`+run+`"`, 1)
				res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": run}, b)
				got := frames(t, res.Body)
				res.Body.Close()
				if len(got) != want {
					t.Fatalf("re-POST of %s served %d frames, want the %d stored", run, len(got), want)
				}
			}
			e.h.Wait()
			if n := len(adapter.Calls()); n != 1 {
				t.Fatalf("model called %d times", n)
			}
			if rec := mustRecord(t, store, "r1"); rec.Status != durable.StatusInterrupted {
				t.Fatalf("r1 record %+v", rec)
			}
		})
	}
}
