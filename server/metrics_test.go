package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/goai-sdk/goai/provider/scripted"
)

// metricValue returns the value of the series named name in a /metrics
// body, and whether it is there.
func metricValue(t *testing.T, body, name string) (int64, bool) {
	t.Helper()
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q is not a count", name, v)
			}
			return n, true
		}
	}
	return 0, false
}

// The store's group commits are counted on /metrics for a store that
// counts them (SQLite, Postgres), and absent for one that does not.
func TestMetricsCountStoreCommits(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			e := newItemEnv(t, newStore(t), scripted.New(slowScenario(t, 6, 2)), nil)
			res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1"}, body)
			if _, err := io.Copy(io.Discard, res.Body); err != nil {
				t.Fatal(err)
			}
			res.Body.Close()

			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
			}
			m := rec.Body.String()
			appends, ok := metricValue(t, m, "goai_append_duration_seconds_count")
			if !ok || appends == 0 {
				t.Fatalf("no appends counted:\n%s", m)
			}
			commits, hasCommits := metricValue(t, m, "goai_store_commits_total")
			writes, hasWrites := metricValue(t, m, "goai_store_writes_total")
			if name == "memory" {
				if hasCommits || hasWrites {
					t.Fatalf("the memory store commits nothing, yet:\n%s", m)
				}
				return
			}
			if !hasCommits || !hasWrites {
				t.Fatalf("commit series missing:\n%s", m)
			}
			// Every append is a write of some commit; commits carry one
			// write at least.
			if commits < 1 || writes < commits || writes < appends {
				t.Fatalf("commits %d, writes %d, appends %d:\n%s", commits, writes, appends, m)
			}
		})
	}
}
