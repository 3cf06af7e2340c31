package main

import (
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/middleware/toolcache"
	"github.com/goai-sdk/goai/provider/scripted"
)

func newCatalogue() *scripted.Catalogue {
	// "cache" is toolCacheMiddleware() with defaults: a fresh 100-entry LRU
	// per scenario run.
	return &scripted.Catalogue{Cache: func() *chat.Middleware { return toolcache.New(toolcache.Options{}) }}
}
