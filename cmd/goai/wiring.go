package main

import (
	"errors"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/provider/scripted"
)

func newCatalogue() *scripted.Catalogue {
	return &scripted.Catalogue{}
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
