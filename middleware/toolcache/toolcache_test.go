package toolcache_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/middleware/internal/mwtest"
	"github.com/goai-sdk/goai/middleware/toolcache"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// calc is a tool that records every execution.
type calc struct {
	mu   sync.Mutex
	seen []string
}

func (c *calc) executed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

func (c *calc) tools() []*chat.Tool {
	add := &chat.Tool{Name: "add", Description: "add", Execute: func(_ context.Context, args json.RawMessage) (any, error) {
		var in struct{ A, B, X float64 }
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.seen = append(c.seen, "add"+string(args))
		c.mu.Unlock()
		return map[string]any{"sum": in.A + in.B + in.X}, nil
	}}
	echo := &chat.Tool{Name: "echo", Description: "echo", Execute: func(_ context.Context, args json.RawMessage) (any, error) {
		c.mu.Lock()
		c.seen = append(c.seen, "echo"+string(args))
		c.mu.Unlock()
		return string(args), nil
	}}
	fail := &chat.Tool{Name: "fail", Description: "fail", Execute: func(_ context.Context, args json.RawMessage) (any, error) {
		c.mu.Lock()
		c.seen = append(c.seen, "fail"+string(args))
		c.mu.Unlock()
		return nil, errors.New("tool failed on purpose")
	}}
	return []*chat.Tool{add, echo, fail}
}

// run drives the engine: one tool turn per call, then a text turn.
func run(t *testing.T, c *calc, mws []*chat.Middleware, debug *chat.Debug, calls ...mwtest.Call) []agui.Event {
	t.Helper()
	a := &mwtest.Turns{}
	for _, call := range calls {
		a.Turns = append(a.Turns, mwtest.ToolTurn(call))
	}
	a.Turns = append(a.Turns, mwtest.TextTurn("m-end", "done"))
	evs := mwtest.Collect(t, chat.Options{Adapter: a, Messages: mwtest.User("go"), Tools: c.tools(), Middleware: mws,
		Strategy: chat.MaxIterations(len(calls) + 1), Debug: debug})
	if a.Calls() != len(calls)+1 {
		t.Fatalf("model calls %d, want %d", a.Calls(), len(calls)+1)
	}
	return evs
}

func results(evs []agui.Event) []string {
	var out []string
	for _, e := range mwtest.Of(evs, agui.ToolCallResult) {
		out = append(out, e.Content)
	}
	return out
}

func call(id, name, args string) mwtest.Call { return mwtest.Call{ID: id, Name: name, Args: args} }

func eq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// Check 52: an identical second call is served without executing, across
// turns of one run and across runs; the canonical key ignores key order.
func TestCheck52IdenticalCallServedFromCache(t *testing.T) {
	c := &calc{}
	mw := toolcache.New(toolcache.Options{})
	evs := run(t, c, []*chat.Middleware{mw}, nil,
		call("c1", "add", `{"a":5,"b":6}`), call("c2", "add", `{"a":5,"b":6}`), call("c3", "add", ` {"b":6, "a":5} `))
	eq(t, "executions", c.executed(), []string{`add{"a":5,"b":6}`})
	eq(t, "results", results(evs), []string{`{"sum":11}`, `{"sum":11}`, `{"sum":11}`})

	evs = run(t, c, []*chat.Middleware{mw}, nil, call("d1", "add", `{"a":5,"b":6}`), call("d2", "add", `{"a":5,"b":7}`))
	eq(t, "executions after a second run", c.executed(), []string{`add{"a":5,"b":6}`, `add{"a":5,"b":7}`})
	eq(t, "second run results", results(evs), []string{`{"sum":11}`, `{"sum":12}`})
}

// A cached hit still reports onAfterToolCall{ok:true} to later middleware
// and never reaches later onBeforeToolCall hooks (first-win).
func TestHitIsASkipDecision(t *testing.T) {
	c := &calc{}
	var afters []string
	var laterBefore int
	spy := &chat.Middleware{Name: "spy",
		OnBeforeToolCall: func(*chat.Context, *chat.ToolCallHook) (chat.ToolDecision, error) {
			laterBefore++
			return chat.ToolDecision{}, nil
		},
		OnAfterToolCall: func(_ *chat.Context, info chat.AfterToolCallInfo) error {
			b, _ := json.Marshal(info.Result)
			afters = append(afters, fmt.Sprintf("%s ok=%v %s", info.ToolCallID, info.OK, b))
			return nil
		}}
	run(t, c, []*chat.Middleware{toolcache.New(toolcache.Options{}), spy}, nil, call("c1", "echo", `{"t":1}`), call("c2", "echo", `{"t":1}`))
	eq(t, "executions", c.executed(), []string{`echo{"t":1}`})
	eq(t, "afters", afters, []string{`c1 ok=true {"t":1}`, `c2 ok=true {"t":1}`})
	if laterBefore != 1 {
		t.Fatalf("later onBeforeToolCall asked %d times, want 1 (not on the hit)", laterBefore)
	}
}

// Check 52: failures are not cached.
func TestCheck52FailuresNotCached(t *testing.T) {
	c := &calc{}
	mem := toolcache.NewMemory(0)
	evs := run(t, c, []*chat.Middleware{toolcache.New(toolcache.Options{Storage: mem})}, nil, call("c1", "fail", `{}`), call("c2", "fail", `{}`))
	eq(t, "executions", c.executed(), []string{"fail{}", "fail{}"})
	eq(t, "results", results(evs), []string{`{"error":"tool failed on purpose"}`, `{"error":"tool failed on purpose"}`})
	if mem.Len() != 0 {
		t.Fatalf("store holds %d entries after failures", mem.Len())
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// spyStore records operations on a Memory store.
type spyStore struct {
	*toolcache.Memory
	mu  sync.Mutex
	ops []string
}

func (s *spyStore) log(op string) {
	s.mu.Lock()
	s.ops = append(s.ops, op)
	s.mu.Unlock()
}

func (s *spyStore) Get(ctx context.Context, key string) (toolcache.Entry, bool, error) {
	e, ok, err := s.Memory.Get(ctx, key)
	s.log(fmt.Sprintf("get %s %v", key, ok))
	return e, ok, err
}

func (s *spyStore) Set(ctx context.Context, key string, e toolcache.Entry) error {
	s.log("set " + key)
	return s.Memory.Set(ctx, key, e)
}

func (s *spyStore) Delete(ctx context.Context, key string) error {
	s.log("delete " + key)
	return s.Memory.Delete(ctx, key)
}

func (s *spyStore) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops := s.ops
	s.ops = nil
	return ops
}

// Check 52: expired entries are deleted on lookup and the tool runs again.
func TestCheck52ExpiredEntriesDeleted(t *testing.T) {
	c := &calc{}
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	store := &spyStore{Memory: toolcache.NewMemory(0)}
	mw := toolcache.New(toolcache.Options{TTL: time.Minute, Storage: store, Now: clk.now})
	key := `["add",{"a":1,"b":2}]`

	run(t, c, []*chat.Middleware{mw}, nil, call("c1", "add", `{"a":1,"b":2}`))
	eq(t, "first run ops", store.take(), []string{"get " + key + " false", "set " + key})

	clk.advance(59 * time.Second)
	run(t, c, []*chat.Middleware{mw}, nil, call("c2", "add", `{"a":1,"b":2}`))
	eq(t, "fresh hit ops (a hit is not stored again)", store.take(), []string{"get " + key + " true"})
	eq(t, "executions while fresh", c.executed(), []string{`add{"a":1,"b":2}`})

	clk.advance(time.Second) // exactly TTL old: stale
	run(t, c, []*chat.Middleware{mw}, nil, call("c3", "add", `{"a":1,"b":2}`))
	eq(t, "stale ops", store.take(), []string{"get " + key + " true", "delete " + key, "set " + key})
	eq(t, "executions after expiry", c.executed(), []string{`add{"a":1,"b":2}`, `add{"a":1,"b":2}`})
}

// Check 52: the default store is a true LRU of MaxSize entries (a hit
// refreshes), so here the second x=2 call runs again but x=3 stays cached.
func TestCheck52LRUEvictionAtMaxSize(t *testing.T) {
	c := &calc{}
	mw := toolcache.New(toolcache.Options{MaxSize: 2})
	run(t, c, []*chat.Middleware{mw}, nil,
		call("c1", "add", `{"x":1}`), call("c2", "add", `{"x":2}`), call("c3", "add", `{"x":1}`),
		call("c4", "add", `{"x":3}`), call("c5", "add", `{"x":2}`), call("c6", "add", `{"x":3}`))
	// FIFO eviction would give x=1, x=2, x=3 only.
	eq(t, "executions", c.executed(), []string{`add{"x":1}`, `add{"x":2}`, `add{"x":3}`, `add{"x":2}`})
}

func TestMemoryLRU(t *testing.T) {
	ctx := context.Background()
	m := toolcache.NewMemory(3)
	for _, k := range []string{"a", "b", "c"} {
		_ = m.Set(ctx, k, toolcache.Entry{Result: k})
	}
	if _, ok, _ := m.Get(ctx, "a"); !ok {
		t.Fatal("a missing")
	}
	_ = m.Set(ctx, "b", toolcache.Entry{Result: "b2"}) // update refreshes b
	_ = m.Set(ctx, "d", toolcache.Entry{Result: "d"})  // evicts c
	if _, ok, _ := m.Get(ctx, "c"); ok {
		t.Fatal("c should have been evicted")
	}
	_ = m.Set(ctx, "e", toolcache.Entry{Result: "e"}) // evicts a
	for k, want := range map[string]bool{"a": false, "b": true, "d": true, "e": true} {
		if _, ok, _ := m.Get(ctx, k); ok != want {
			t.Errorf("%s present=%v, want %v", k, ok, want)
		}
	}
	if e, _, _ := m.Get(ctx, "b"); e.Result != "b2" {
		t.Errorf("b = %v", e.Result)
	}
	_ = m.Delete(ctx, "b")
	if m.Len() != 2 {
		t.Fatalf("len %d", m.Len())
	}
	if n := toolcache.NewMemory(0); n == nil {
		t.Fatal("nil")
	}
}

func TestToolNamesAllowList(t *testing.T) {
	c := &calc{}
	mw := toolcache.New(toolcache.Options{ToolNames: []string{"add"}})
	run(t, c, []*chat.Middleware{mw}, nil,
		call("c1", "echo", `{"t":1}`), call("c2", "echo", `{"t":1}`), call("c3", "add", `{"a":1}`), call("c4", "add", `{"a":1}`))
	eq(t, "executions", c.executed(), []string{`echo{"t":1}`, `echo{"t":1}`, `add{"a":1}`})
}

func TestCustomKey(t *testing.T) {
	c := &calc{}
	// Key on the tool name only: any arguments hit.
	mw := toolcache.New(toolcache.Options{Key: func(name string, _ json.RawMessage) (string, error) { return name, nil }})
	evs := run(t, c, []*chat.Middleware{mw}, nil, call("c1", "add", `{"a":1}`), call("c2", "add", `{"a":2}`))
	eq(t, "executions", c.executed(), []string{`add{"a":1}`})
	eq(t, "results", results(evs), []string{`{"sum":1}`, `{"sum":1}`})
}

// Empty and null arguments run the tool with {} and so share its key.
func TestEmptyAndNullArgsKeyAsEmptyObject(t *testing.T) {
	c := &calc{}
	run(t, c, []*chat.Middleware{toolcache.New(toolcache.Options{})}, nil, call("c1", "echo", ``), call("c2", "echo", `null`), call("c3", "echo", `{}`))
	eq(t, "executions", c.executed(), []string{`echo{}`})
}

func TestDefaultKey(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{`{"a":5,"b":6}`, `["add",{"a":5,"b":6}]`},
		{`{"b":6,"a":5}`, `["add",{"a":5,"b":6}]`},
		{` { "z" : [3, {"y":1,"x":2}], "a": "<&>" } `, `["add",{"a":"<&>","z":[3,{"x":2,"y":1}]}]`},
		{`{"n":12345678901234567890}`, `["add",{"n":12345678901234567890}]`},
	} {
		got, err := toolcache.DefaultKey("add", json.RawMessage(tc.args))
		if err != nil || got != tc.want {
			t.Errorf("DefaultKey(%s) = %s, %v; want %s", tc.args, got, err, tc.want)
		}
	}
	if _, err := toolcache.DefaultKey("add", json.RawMessage(`{bad`)); err == nil {
		t.Error("bad JSON: no error")
	}
}

type brokenStore struct{}

var errDown = errors.New("store is down")

func (brokenStore) Get(context.Context, string) (toolcache.Entry, bool, error) {
	return toolcache.Entry{}, false, errDown
}
func (brokenStore) Set(context.Context, string, toolcache.Entry) error { return errDown }
func (brokenStore) Delete(context.Context, string) error               { return errDown }

// A storage outage makes every call a miss, logged in the errors category;
// the run itself succeeds.
func TestStorageFailureIsAMissAndLogged(t *testing.T) {
	c := &calc{}
	var buf bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	evs := run(t, c, []*chat.Middleware{toolcache.New(toolcache.Options{Storage: brokenStore{}})}, &chat.Debug{Logger: lg},
		call("c1", "add", `{"a":1}`), call("c2", "add", `{"a":1}`))
	eq(t, "executions", c.executed(), []string{`add{"a":1}`, `add{"a":1}`})
	eq(t, "results", results(evs), []string{`{"sum":1}`, `{"sum":1}`})
	out := buf.String()
	if strings.Count(out, "tool cache get failed for tool add") != 2 || strings.Count(out, "tool cache set failed") != 2 ||
		!strings.Contains(out, "[tanstack-ai:errors]") || !strings.Contains(out, "store is down") || !strings.Contains(out, "level=ERROR") {
		t.Fatalf("log:\n%s", out)
	}
}

// Many concurrent runs share one middleware and store (run with -race).
// Each run calls the tool twice with the same arguments, one call after
// the other: with room for every key, the second call is always a hit, so
// each key runs at least once and each run at most once. With less room
// than keys, another run may evict a run's entry between its two calls,
// so the second may run too; every result is still right.
func TestConcurrentRuns(t *testing.T) {
	for _, tc := range []struct {
		maxSize, most int
	}{{6, 16}, {4, 32}} {
		c := &calc{}
		mw := toolcache.New(toolcache.Options{MaxSize: tc.maxSize})
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				args := fmt.Sprintf(`{"a":%d}`, i%6)
				evs := run(t, c, []*chat.Middleware{mw}, nil, call("c1", "add", args), call("c2", "add", args))
				want := fmt.Sprintf(`{"sum":%d}`, i%6)
				if got := results(evs); len(got) != 2 || got[0] != want || got[1] != want {
					t.Errorf("run %d: results %v, want two %s", i, got, want)
				}
			})
		}
		wg.Wait()
		if n := len(c.executed()); n < 6 || n > tc.most {
			t.Fatalf("MaxSize %d: %d executions for 32 calls over 6 keys, want 6 to %d", tc.maxSize, n, tc.most)
		}
	}
}
