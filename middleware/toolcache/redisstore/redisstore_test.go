package redisstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/middleware/internal/mwtest"
	"github.com/goai-sdk/goai/middleware/toolcache"
	"github.com/goai-sdk/goai/middleware/toolcache/redisstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// client connects to the server scripts/setup-redis.sh started.
func client(t *testing.T) *redis.Client {
	t.Helper()
	url := os.Getenv("GOAI_TEST_REDIS")
	if url == "" {
		t.Skip("GOAI_TEST_REDIS is unset: run scripts/setup-redis.sh (scripts/test.sh does) to test the Redis store against a real redis-server")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("GOAI_TEST_REDIS=%q: %v", url, err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("GOAI_TEST_REDIS=%s is set but Redis does not answer: %v", url, err)
	}
	return rdb
}

// prefix is a fresh key namespace, removed when the test ends.
func prefix(t *testing.T, rdb *redis.Client) string {
	p := fmt.Sprintf("goai-test:%s:%d:", t.Name(), rand.Int64())
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := rdb.Keys(ctx, p+"*").Result()
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
	return p
}

func TestStoreRoundTrip(t *testing.T) {
	rdb := client(t)
	ctx := context.Background()
	p := prefix(t, rdb)
	s := redisstore.New(rdb, redisstore.Options{Prefix: p, Expiration: time.Hour})
	if _, ok, err := s.Get(ctx, "k"); ok || err != nil {
		t.Fatalf("empty store: found=%v err=%v", ok, err)
	}
	ts := time.UnixMilli(1_700_000_000_123)
	in := map[string]any{"sum": 11.5, "big": json.Number("12345678901234567890"), "list": []any{"a", true, nil}}
	if err := s.Set(ctx, `["add",{"a":5}]`, toolcache.Entry{Result: in, Timestamp: ts}); err != nil {
		t.Fatal(err)
	}
	e, ok, err := s.Get(ctx, `["add",{"a":5}]`)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	got, _ := json.Marshal(e.Result)
	want, _ := json.Marshal(in)
	if !bytes.Equal(got, want) || !e.Timestamp.Equal(ts) {
		t.Fatalf("got %s at %v, want %s at %v", got, e.Timestamp, want, ts)
	}
	keys, _ := rdb.Keys(ctx, p+"*").Result()
	if len(keys) != 1 || len(keys[0]) != len(p)+64 {
		t.Fatalf("keys %q", keys)
	}
	if ttl := rdb.TTL(ctx, keys[0]).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("expiration %v, want about 1h", ttl)
	}
	if err := s.Delete(ctx, `["add",{"a":5}]`); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(ctx, `["add",{"a":5}]`); ok {
		t.Fatal("entry survived Delete")
	}
	// A value that is not an entry is reported, not served.
	rdb.Set(ctx, keys[0], "garbage", 0)
	if _, ok, err := s.Get(ctx, `["add",{"a":5}]`); ok || err == nil {
		t.Fatalf("garbage entry: found=%v err=%v", ok, err)
	}
}

type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) tools() []*chat.Tool {
	rec := func(name string) {
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[name]++
		c.mu.Unlock()
	}
	return []*chat.Tool{
		{Name: "add", Execute: func(_ context.Context, args json.RawMessage) (any, error) {
			rec("add")
			var in struct{ A, B float64 }
			_ = json.Unmarshal(args, &in)
			return map[string]any{"sum": in.A + in.B}, nil
		}},
		{Name: "fail", Execute: func(context.Context, json.RawMessage) (any, error) {
			rec("fail")
			return nil, errors.New("tool failed on purpose")
		}},
	}
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func runCalls(t *testing.T, c *counter, mw *chat.Middleware, debug *chat.Debug, calls ...mwtest.Call) []string {
	t.Helper()
	a := &mwtest.Turns{}
	for _, call := range calls {
		a.Turns = append(a.Turns, mwtest.ToolTurn(call))
	}
	a.Turns = append(a.Turns, mwtest.TextTurn("m", "ok"))
	evs := mwtest.Collect(t, chat.Options{Adapter: a, Messages: mwtest.User("go"), Tools: c.tools(),
		Middleware: []*chat.Middleware{mw}, Strategy: chat.MaxIterations(len(calls) + 1), Debug: debug})
	var out []string
	for _, e := range mwtest.Of(evs, agui.ToolCallResult) {
		out = append(out, e.Content)
	}
	return out
}

// Check 52 against a real Redis: identical calls hit (also across
// middleware instances sharing the server), failures are not cached,
// expired entries are deleted.
func TestCheck52WithRedis(t *testing.T) {
	rdb := client(t)
	ctx := context.Background()
	p := prefix(t, rdb)
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	newMW := func() *chat.Middleware {
		return toolcache.New(toolcache.Options{TTL: time.Minute, Now: clock, Storage: redisstore.New(rdb, redisstore.Options{Prefix: p})})
	}
	c := &counter{}
	got := runCalls(t, c, newMW(), nil, mwtest.Call{ID: "c1", Name: "add", Args: `{"a":5,"b":6}`}, mwtest.Call{ID: "c2", Name: "add", Args: `{"b":6,"a":5}`})
	if c.get("add") != 1 || strings.Join(got, " ") != `{"sum":11} {"sum":11}` {
		t.Fatalf("executions %d, results %v", c.get("add"), got)
	}
	// A second process (another middleware, same Redis) hits too.
	got = runCalls(t, c, newMW(), nil, mwtest.Call{ID: "c3", Name: "add", Args: `{"a":5,"b":6}`})
	if c.get("add") != 1 || got[0] != `{"sum":11}` {
		t.Fatalf("second instance: executions %d, results %v", c.get("add"), got)
	}

	runCalls(t, c, newMW(), nil, mwtest.Call{ID: "f1", Name: "fail", Args: `{}`}, mwtest.Call{ID: "f2", Name: "fail", Args: `{}`})
	if c.get("fail") != 2 {
		t.Fatalf("failing tool ran %d times, want 2", c.get("fail"))
	}
	if n := len(rdb.Keys(ctx, p+"*").Val()); n != 1 {
		t.Fatalf("%d keys in Redis, want 1 (the add result only)", n)
	}

	// Expire: the stale entry is deleted on lookup and the tool runs again.
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	key, _ := toolcache.DefaultKey("add", json.RawMessage(`{"a":5,"b":6}`))
	s := redisstore.New(rdb, redisstore.Options{Prefix: p})
	deleting := &deleteSpy{Storage: s}
	runCalls(t, c, toolcache.New(toolcache.Options{TTL: time.Minute, Now: clock, Storage: deleting}), nil, mwtest.Call{ID: "c4", Name: "add", Args: `{"a":5,"b":6}`})
	if c.get("add") != 2 || deleting.deleted != key {
		t.Fatalf("after expiry: executions %d, deleted %q", c.get("add"), deleting.deleted)
	}
	if e, ok, err := s.Get(ctx, key); !ok || err != nil || !e.Timestamp.Equal(clock()) {
		t.Fatalf("fresh entry not stored: %v %v %v", e, ok, err)
	}
}

type deleteSpy struct {
	toolcache.Storage
	deleted string
}

func (d *deleteSpy) Delete(ctx context.Context, key string) error {
	d.deleted = key
	return d.Storage.Delete(ctx, key)
}

// A Redis outage makes the cache miss (logged in the errors category); the
// run succeeds and every call executes.
func TestRedisOutageIsAMiss(t *testing.T) {
	client(t) // only with a Redis under test, so the suite's setup is exercised
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	defer rdb.Close()
	var buf bytes.Buffer
	var bufMu sync.Mutex
	lg := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &bufMu}, nil))
	c := &counter{}
	got := runCalls(t, c, toolcache.New(toolcache.Options{Storage: redisstore.New(rdb, redisstore.Options{})}), &chat.Debug{Logger: lg},
		mwtest.Call{ID: "c1", Name: "add", Args: `{"a":1}`}, mwtest.Call{ID: "c2", Name: "add", Args: `{"a":1}`})
	if c.get("add") != 2 || strings.Join(got, " ") != `{"sum":1} {"sum":1}` {
		t.Fatalf("executions %d, results %v", c.get("add"), got)
	}
	bufMu.Lock()
	out := buf.String()
	bufMu.Unlock()
	if strings.Count(out, "tool cache get failed") != 2 || !strings.Contains(out, "redisstore: get:") || !strings.Contains(out, "level=ERROR") {
		t.Fatalf("log:\n%s", out)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A server that goes away mid-life: the entry stored while it was up is
// unreachable after SHUTDOWN, so the call misses and runs.
func TestRedisShutdownMidwayIsAMiss(t *testing.T) {
	client(t)
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not in PATH although GOAI_TEST_REDIS is set: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	srv := exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = srv.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		<-exited
	})
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	defer rdb.Close()
	for i := 0; rdb.Ping(context.Background()).Err() != nil; i++ {
		if i > 100 {
			t.Fatal("private redis-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var buf bytes.Buffer
	var bufMu sync.Mutex
	lg := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &bufMu}, nil))
	mw := toolcache.New(toolcache.Options{Storage: redisstore.New(rdb, redisstore.Options{})})
	c := &counter{}
	runCalls(t, c, mw, &chat.Debug{Logger: lg}, mwtest.Call{ID: "c1", Name: "add", Args: `{"a":1}`}, mwtest.Call{ID: "c2", Name: "add", Args: `{"a":1}`})
	if c.get("add") != 1 {
		t.Fatalf("executions %d while Redis is up, want 1", c.get("add"))
	}
	_ = rdb.Shutdown(context.Background()).Err() // the connection drops: an error is expected
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("redis-server did not shut down")
	}
	got := runCalls(t, c, mw, &chat.Debug{Logger: lg}, mwtest.Call{ID: "c3", Name: "add", Args: `{"a":1}`})
	if c.get("add") != 2 || got[0] != `{"sum":1}` {
		t.Fatalf("after shutdown: executions %d, results %v", c.get("add"), got)
	}
	bufMu.Lock()
	defer bufMu.Unlock()
	if !strings.Contains(buf.String(), "tool cache get failed") {
		t.Fatalf("outage not logged:\n%s", buf.String())
	}
}
