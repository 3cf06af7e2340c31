// Package toolcache is a chat middleware that caches server tool results by
// tool name and arguments (TanStack AI's toolCacheMiddleware, docs/engine.md §9).
//
// A call whose key has a fresh entry is not executed: OnBeforeToolCall
// answers chat.Skip(result). A stale entry is deleted when it is looked up.
// Only successful executions are stored (OnAfterToolCall with OK); failures
// are never cached. The default store is an in-memory LRU of MaxSize
// entries; Storage plugs in another (see the redisstore package).
//
// Deliberate differences from @tanstack/ai 0.58.0:
//   - The default key is canonical JSON of [name, args] (object keys
//     sorted), so {"b":6,"a":5} hits an entry stored for {"a":5,"b":6}. The
//     reference keys on JSON.stringify of the arguments as received.
//   - An entry is stored under the key its lookup used (for the arguments
//     the middleware was asked about), not under the call's raw arguments,
//     so an approval's edited arguments cannot store a result under the
//     original arguments. When the lookup did not happen (an earlier
//     middleware decided first) the raw arguments are used, as in 0.58.0.
//   - A hit is not stored again. 0.58.0 re-stores the result it served
//     with a new timestamp, so an entry that keeps being hit never expires.
//
// Storage failures never fail a run: they are logged through the run's
// logger in the errors category and the call is treated as a miss.
package toolcache

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/goai-sdk/goai/chat"
)

// DefaultMaxSize is the default store's capacity.
const DefaultMaxSize = 100

// Entry is one cached result.
type Entry struct {
	// Result is the tool's result as the engine reported it (a JSON-shaped
	// value). Stores may serialize it; treat it as read-only.
	Result any
	// Timestamp is when the result was stored.
	Timestamp time.Time
}

// Storage holds entries by key. Implementations must be safe for
// concurrent use. Get reports found=false for a missing key; an error means
// the store could not answer (the middleware logs it and misses).
type Storage interface {
	Get(ctx context.Context, key string) (e Entry, found bool, err error)
	Set(ctx context.Context, key string, e Entry) error
	Delete(ctx context.Context, key string) error
}

// KeyFunc derives the cache key of a call. args is the call's arguments as
// JSON (an object unless the tool takes something else).
type KeyFunc func(toolName string, args json.RawMessage) (string, error)

// Options configure the middleware. The zero value caches every tool
// forever in a 100-entry LRU.
type Options struct {
	// MaxSize is the default store's capacity (LRU eviction); 0 means
	// DefaultMaxSize. Ignored when Storage is set.
	MaxSize int
	// TTL is how long an entry stays fresh; 0 means forever.
	TTL time.Duration
	// ToolNames, when non-nil, limits caching to these tools.
	ToolNames []string
	// Key derives cache keys; default DefaultKey.
	Key KeyFunc
	// Storage replaces the default in-memory LRU.
	Storage Storage
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Name is the middleware's name.
const Name = "tool-cache-middleware"

// New returns the tool cache middleware. One middleware value may serve
// many runs at once; they share the store.
func New(opts Options) *chat.Middleware {
	c := &cache{
		ttl:   opts.TTL,
		names: opts.ToolNames,
		key:   opts.Key,
		store: opts.Storage,
		now:   opts.Now,
		calls: chat.NewCapability[lookups]("toolcache.lookups"),
	}
	if c.key == nil {
		c.key = DefaultKey
	}
	if c.store == nil {
		c.store = NewMemory(opts.MaxSize)
	}
	if c.now == nil {
		c.now = time.Now
	}
	return &chat.Middleware{
		Name:             Name,
		Setup:            func(ctx *chat.Context) error { c.calls.Provide(ctx, lookups{}); return nil },
		OnBeforeToolCall: c.before,
		OnAfterToolCall:  c.after,
	}
}

type cache struct {
	ttl   time.Duration
	names []string
	key   KeyFunc
	store Storage
	now   func() time.Time

	// calls is the run's lookups by tool call id: the lookup made before
	// a call, so its result is stored under the same key (and a hit is not
	// stored again). The engine never runs a run's tool hooks concurrently
	// (chat.ToolRunner), so the map needs no lock.
	calls *chat.Capability[lookups]
}

type lookups map[string]lookup

type lookup struct {
	key string
	hit bool
}

func (c *cache) applies(name string) bool {
	return c.names == nil || slices.Contains(c.names, name)
}

func (c *cache) before(ctx *chat.Context, h *chat.ToolCallHook) (chat.ToolDecision, error) {
	if !c.applies(h.ToolName) {
		return chat.ToolDecision{}, nil
	}
	key, err := c.key(h.ToolName, normalizeArgs(h.Args))
	if err != nil {
		logErr(ctx, "key", h.ToolName, err)
		return chat.ToolDecision{}, nil
	}
	e, found, err := c.store.Get(ctx, key)
	if err != nil {
		logErr(ctx, "get", h.ToolName, err)
		found = false
	}
	fresh := found && (c.ttl <= 0 || c.now().Sub(e.Timestamp) < c.ttl)
	c.remember(ctx, h.ToolCallID, lookup{key: key, hit: fresh})
	if !found {
		return chat.ToolDecision{}, nil
	}
	if fresh {
		return chat.Skip(e.Result), nil
	}
	if err := c.store.Delete(ctx, key); err != nil {
		logErr(ctx, "delete", h.ToolName, err)
	}
	return chat.ToolDecision{}, nil
}

func (c *cache) after(ctx *chat.Context, info chat.AfterToolCallInfo) error {
	l, looked := c.recall(ctx, info.ToolCallID)
	if !info.OK || !c.applies(info.ToolName) || l.hit {
		return nil
	}
	key := l.key
	if !looked {
		raw := strings.TrimSpace(info.ToolCall.Function.Arguments)
		if raw == "" {
			raw = "{}"
		}
		if !json.Valid([]byte(raw)) {
			return nil
		}
		var err error
		if key, err = c.key(info.ToolName, normalizeArgs(json.RawMessage(raw))); err != nil {
			logErr(ctx, "key", info.ToolName, err)
			return nil
		}
	}
	if err := c.store.Set(ctx, key, Entry{Result: info.Result, Timestamp: c.now()}); err != nil {
		logErr(ctx, "set", info.ToolName, err)
	}
	return nil
}

func (c *cache) remember(ctx *chat.Context, callID string, l lookup) {
	if m, ok := c.calls.GetOptional(ctx); ok {
		m[callID] = l
	}
}

func (c *cache) recall(ctx *chat.Context, callID string) (lookup, bool) {
	m, _ := c.calls.GetOptional(ctx)
	l, ok := m[callID]
	delete(m, callID)
	return l, ok
}

func logErr(ctx *chat.Context, op, tool string, err error) {
	ctx.Logger().Log(chat.CatErrors, fmt.Sprintf("tool cache %s failed for tool %s; treating as a miss: %v", op, tool, err),
		slog.String("middleware", Name), slog.String("tool", tool))
}

// normalizeArgs makes the engine's and the raw arguments agree: JSON that
// is neither an object nor an array runs the tool with {} (docs/engine.md §8),
// so it keys as {}.
func normalizeArgs(args json.RawMessage) json.RawMessage {
	b := bytes.TrimSpace(args)
	if len(b) == 0 || (b[0] != '{' && b[0] != '[') {
		return json.RawMessage("{}")
	}
	return b
}

// DefaultKey is canonical JSON of [toolName, args]: object keys sorted,
// no insignificant whitespace, numbers as written.
func DefaultKey(toolName string, args json.RawMessage) (string, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("toolcache: arguments of %s are not JSON: %w", toolName, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode([]any{toolName, v}); err != nil {
		return "", fmt.Errorf("toolcache: encoding key of %s: %w", toolName, err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}
