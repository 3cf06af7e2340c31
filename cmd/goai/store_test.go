package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/goai-sdk/goai/durable"
)

// With --store memory, runs are durable within the process: a run's log
// replays from its start, every event with its offset, the same events its
// own response carried, and /api/info names the store.
func TestServeMemoryStore(t *testing.T) {
	// Without a SQLite file goai keeps its workspaces under ./.goai.
	t.Chdir(t.TempDir())
	base, _ := startServe(t, "--store", "memory")
	const runID = "memory-run-1"
	live := post(t, base, runBody("memory-thread", runID, []map[string]any{{"id": "u1", "role": "user", "content": "hello"}}))
	replay := post2get(t, base, runID)
	if len(live) == 0 || len(replay) != len(live) {
		t.Fatalf("the response carried %d events, the replay %d", len(live), len(replay))
	}
	for i, e := range replay {
		if e.id != durable.FormatOffset("memory", runID, int64(i+1)) {
			t.Fatalf("event %d: offset %q", i, e.id)
		}
		want, _ := json.Marshal(live[i])
		got, _ := json.Marshal(e.ev)
		if string(got) != string(want) {
			t.Fatalf("event %d replayed as %s, sent as %s", i, got, want)
		}
	}
	if last := live[len(live)-1].str("type"); last != "RUN_FINISHED" {
		t.Fatalf("the run ended with %s", last)
	}
	res, err := http.Get(base + "/api/info")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var info map[string]any
	if err := json.Unmarshal(body, &info); err != nil || info["store"] != "memory" {
		t.Fatalf("/api/info: %s (%v)", body, err)
	}
}

// An unknown store is refused with the choices named.
func TestOpenStoreRefusesAnUnknownStore(t *testing.T) {
	_, _, err := openStore(t.Context(), "mongodb://x")
	if err == nil || !strings.Contains(err.Error(), "memory") || !strings.Contains(err.Error(), "sqlite:PATH") {
		t.Fatalf("openStore(mongodb://x): %v", err)
	}
}
