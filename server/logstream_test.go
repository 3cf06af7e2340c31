package server_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/sqlite"
	"github.com/goai-sdk/goai/provider/scripted"
)

// unreported hides everything of a store but durable.Store, so that its
// reads do not report catching up (durable.CaughtUpReporter).
type unreported struct{ durable.Store }

// A durable response sends what its read found as soon as the read has
// caught up with the log: the first token is on the wire while the model
// still waits to yield the next. The handler writes the response itself
// when the store reports catching up (memory, SQLite) and through a sender
// otherwise.
func TestDurableResponseSendsEntriesWhenCaughtUp(t *testing.T) {
	sc, err := scripted.Parse([]byte(`{"name":"pause","turns":[[
		{"type":"RUN_STARTED","threadId":"t1","runId":"r1"},
		{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"},
		{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"first"},
		{"delayMs":600000},
		{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"never"},
		{"type":"TEXT_MESSAGE_END","messageId":"m1"},
		{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","finishReason":"stop"}]]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) durable.Store
	}{
		{"memory", func(*testing.T) durable.Store { return durable.NewMemory(nil) }},
		{"sqlite", func(t *testing.T) durable.Store {
			s, err := sqlite.Open(filepath.Join(t.TempDir(), "goai.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Shutdown() })
			return s
		}},
		{"unreported", func(*testing.T) durable.Store { return unreported{durable.NewMemory(nil)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newItemEnv(t, tc.store(t), scripted.New(sc), nil)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res := post(t, ctx, e.url(), map[string]string{"X-Run-Id": "r1"}, body)
			defer res.Body.Close()
			for f, err := range agui.ReadSSE(res.Body) {
				if err != nil {
					t.Fatalf("before the first token arrived: %v", err)
				}
				if f.ID == "" {
					t.Fatalf("frame %s without its offset", f.Data)
				}
				if f.Event.Type == agui.TextMessageContent {
					if f.Event.Delta != "first" {
						t.Fatalf("first delta %q", f.Event.Delta)
					}
					return
				}
			}
			t.Fatal("the response ended before the first token")
		})
	}
}
