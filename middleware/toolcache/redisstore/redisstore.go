// Package redisstore is a Redis-backed toolcache.Storage, so several goai
// processes share one tool cache.
//
// Each entry is one string key, Prefix + hex(SHA-256(cache key)), holding
// {"result":…,"timestamp":<ms>}. Results must therefore be JSON-encodable;
// they come back decoded as JSON values (map[string]any, []any,
// json.Number, string, bool, nil), which the engine encodes back to the
// same JSON. The middleware's TTL still decides freshness;
// Options.Expiration additionally lets Redis drop entries on its own.
// There is no size limit: configure Redis eviction (maxmemory-policy
// allkeys-lru) for that.
//
// A Redis failure is returned as an error, which the middleware logs and
// treats as a miss; give the client short timeouts (DialTimeout,
// ReadTimeout, MaxRetries) so an outage costs little per call.
package redisstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goai-sdk/goai/middleware/toolcache"
)

// DefaultPrefix prefixes every key the store writes.
const DefaultPrefix = "goai:toolcache:"

// Options configure a Store.
type Options struct {
	// Prefix namespaces the keys; default DefaultPrefix.
	Prefix string
	// Expiration, when positive, is set on every key so Redis deletes it.
	Expiration time.Duration
}

// Store is a toolcache.Storage in Redis.
type Store struct {
	rdb    redis.Cmdable
	prefix string
	exp    time.Duration
}

// New returns a store using rdb (a *redis.Client, *redis.ClusterClient or
// any redis.Cmdable). The caller owns and closes the client.
func New(rdb redis.Cmdable, opts Options) *Store {
	p := opts.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	return &Store{rdb: rdb, prefix: p, exp: opts.Expiration}
}

type wireEntry struct {
	Result    json.RawMessage `json:"result"`
	Timestamp int64           `json:"timestamp"`
}

func (s *Store) redisKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return s.prefix + hex.EncodeToString(sum[:])
}

// Get implements toolcache.Storage.
func (s *Store) Get(ctx context.Context, key string) (toolcache.Entry, bool, error) {
	b, err := s.rdb.Get(ctx, s.redisKey(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return toolcache.Entry{}, false, nil
	}
	if err != nil {
		return toolcache.Entry{}, false, fmt.Errorf("redisstore: get: %w", err)
	}
	var w wireEntry
	if err := json.Unmarshal(b, &w); err != nil {
		return toolcache.Entry{}, false, fmt.Errorf("redisstore: decoding entry: %w", err)
	}
	var result any
	if len(w.Result) > 0 {
		d := json.NewDecoder(bytes.NewReader(w.Result))
		d.UseNumber() // numbers come back exactly as stored
		if err := d.Decode(&result); err != nil {
			return toolcache.Entry{}, false, fmt.Errorf("redisstore: decoding result: %w", err)
		}
	}
	return toolcache.Entry{Result: result, Timestamp: time.UnixMilli(w.Timestamp)}, true, nil
}

// Set implements toolcache.Storage.
func (s *Store) Set(ctx context.Context, key string, e toolcache.Entry) error {
	res, err := json.Marshal(e.Result)
	if err != nil {
		return fmt.Errorf("redisstore: encoding result: %w", err)
	}
	b, err := json.Marshal(wireEntry{Result: res, Timestamp: e.Timestamp.UnixMilli()})
	if err != nil {
		return fmt.Errorf("redisstore: encoding entry: %w", err)
	}
	if err := s.rdb.Set(ctx, s.redisKey(key), b, s.exp).Err(); err != nil {
		return fmt.Errorf("redisstore: set: %w", err)
	}
	return nil
}

// Delete implements toolcache.Storage.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.rdb.Del(ctx, s.redisKey(key)).Err(); err != nil {
		return fmt.Errorf("redisstore: delete: %w", err)
	}
	return nil
}

var _ toolcache.Storage = (*Store)(nil)
