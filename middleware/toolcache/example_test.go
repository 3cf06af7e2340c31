package toolcache_test

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/middleware/toolcache"
	"github.com/goai-sdk/goai/middleware/toolcache/redisstore"
)

func Example() {
	// Cache getWeather results for a minute, at most 50 of them.
	cache := toolcache.New(toolcache.Options{TTL: time.Minute, MaxSize: 50, ToolNames: []string{"getWeather"}})
	_ = chat.Options{Middleware: []*chat.Middleware{cache}}
}

func Example_redis() {
	// Share the cache between processes through Redis. Short timeouts keep
	// an outage cheap: each failed lookup is logged and treated as a miss.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", DialTimeout: 100 * time.Millisecond,
		ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	cache := toolcache.New(toolcache.Options{TTL: 10 * time.Minute,
		Storage: redisstore.New(rdb, redisstore.Options{Expiration: 10 * time.Minute})})
	_ = chat.Options{Middleware: []*chat.Middleware{cache}}
}
