package server_test

import (
	"bufio"
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// hydrateRunning polls hydration until it reports run active.
func hydrateRunning(t *testing.T, base, run string) hydration {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := hydrate(t, base, "t1")
		if h.ActiveRun != nil && h.ActiveRun.RunID == run {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("hydration never reported %q active: %+v", run, h)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func checkHydratedProcess(t *testing.T, producer, other *goaiProc, run string, n int) {
	t.Helper()
	res := open(t, context.Background(), http.MethodPost, producer.url+"/api/chat", map[string]string{"X-Run-Id": run}, runBody(run))
	stream := newFrameStream(bufio.NewReader(res.Body))
	defer stream.stop()
	defer res.Body.Close()
	stream.read(2) // RUN_STARTED and run.accepted; the deltas come in batches
	// Mid-run, on the other server: the run is active and the user's turn
	// is there.
	h := hydrateRunning(t, other.url, run)
	if len(h.Messages) != 1 || h.Messages[0].ID != "u1" || uiText(h.Messages[0]) != "hi" {
		t.Fatalf("mid-run hydration on the other server: %+v", h.Messages)
	}
	stream.read(-1)
	eventuallyInactive(t, other.url)
	h = hydrate(t, other.url, "t1")
	if h.ActiveRun != nil || !slices.Equal(roles(h.Messages), []string{"user", "assistant"}) || uiText(h.Messages[1]) != wantText(n) {
		t.Fatalf("final hydration on the other server: %+v", h)
	}
}

// `goai serve` on its default SQLite store hydrates a thread: mid-run
// (active run and the user's turn) and after it (the final transcript).
func TestServeProcessHydrateSQLite(t *testing.T) {
	bin := buildGoai(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "goai.db")
	scenario := scenarioFile(t, 40, 25)
	a := startServe(t, bin, nil, "--model", "scripted:"+scenario, "--store", db)
	checkHydratedProcess(t, a, a, "run-hydrate", 40)
}

// Two replicas on one Postgres: a run produced on A hydrates through B.
func TestServeProcessHydrateAcrossReplicasPostgres(t *testing.T) {
	pg := newPGSchema(t)
	bin := buildGoai(t)
	scenario := scenarioFile(t, 40, 25)
	a := startServe(t, bin, nil, "--model", "scripted:"+scenario, "--store", pg)
	b := startServe(t, bin, nil, "--model", "scripted:"+scenario, "--store", pg)
	checkHydratedProcess(t, a, b, "run-hydrate", 40)
}
