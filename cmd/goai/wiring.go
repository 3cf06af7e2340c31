package main

import (
	"errors"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/middleware/toolcache"
	"github.com/goai-sdk/goai/provider/scripted"
)

func newCatalogue() *scripted.Catalogue {
	// "cache" is toolCacheMiddleware() with defaults: a fresh 100-entry LRU
	// per scenario run.
	return &scripted.Catalogue{Cache: func() *chat.Middleware { return toolcache.New(toolcache.Options{}) }}
}

// errorEvent is the RUN_ERROR an encoder writes when the run throws.
func errorEvent(err error) agui.Event {
	ev := agui.Event{Type: agui.RunError, Timestamp: time.Now().UnixMilli(), Message: err.Error()}
	var re *chat.RunError
	if errors.As(err, &re) && re.Code != "" {
		ev.Code = re.Code
	}
	return ev
}
