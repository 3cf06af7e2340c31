package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goai-sdk/goai/durable"
)

// serveHealthz answers 200 while the process serves.
func (h *Handler) serveHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// serveReadyz answers 200 when new runs can be taken: not draining, and the
// store (if any) writable and still the file it opened.
func (h *Handler) serveReadyz(w http.ResponseWriter, r *http.Request) {
	if h.draining.Load() {
		writeError(w, http.StatusServiceUnavailable, "draining", "shutting down")
		return
	}
	if hc, ok := h.cfg.Store.(durable.Healther); ok {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if err := hc.Healthy(ctx, true); err != nil {
			h.cfg.Logger.Error("store unhealthy", "error", err)
			writeError(w, http.StatusServiceUnavailable, "store_unhealthy", "the run store is unhealthy")
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// checkStoreHealthy is the cheap check before a new run: draining, or a
// store that noticed its file removed or replaced, refuses it.
func (h *Handler) checkStoreHealthy(ctx context.Context) error {
	if h.draining.Load() {
		return errors.New("the server is shutting down")
	}
	if hc, ok := h.cfg.Store.(durable.Healther); ok {
		if err := hc.Healthy(ctx, false); err != nil {
			h.cfg.Logger.Error("store unhealthy; refusing new runs", "error", err)
			return errors.New("the run store is unhealthy; new runs are refused")
		}
	}
	return nil
}

// appendBuckets are the upper bounds (seconds) of the append latency
// histogram.
var appendBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}

// metrics are the counters behind /metrics. The Prometheus text format is
// written here by hand: a dozen series do not justify a client library
// and its dependencies in every user's module graph.
type metrics struct {
	started atomic.Int64
	events  atomic.Int64
	streams atomic.Int64
	panics  atomic.Int64

	mu       sync.Mutex
	finished map[string]int64 // by outcome
	requests map[int]int64    // by HTTP status
	buckets  [11]int64        // len(appendBuckets)+1: the last is +Inf
	latSum   float64
	latCount int64
}

func (m *metrics) runStarted() { m.started.Add(1) }

func (m *metrics) finish(outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.finished == nil {
		m.finished = map[string]int64{}
	}
	m.finished[outcome]++
}

func (m *metrics) runFinished(patch durable.RunPatch) {
	s, _ := patch.Status.IsSet()
	m.finish(string(s))
}

func (m *metrics) streamFinished(failed, werr error) {
	switch {
	case failed != nil:
		m.finish(string(durable.StatusFailed))
	case werr != nil:
		m.finish(string(durable.StatusAborted))
	default:
		m.finish(string(durable.StatusCompleted))
	}
}

func (m *metrics) appended(n int, d time.Duration) {
	m.events.Add(int64(n))
	sec := d.Seconds()
	i, _ := slices.BinarySearch(appendBuckets, sec)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buckets[i]++
	m.latSum += sec
	m.latCount++
}

func (m *metrics) request(code int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.requests == nil {
		m.requests = map[int]int64{}
	}
	m.requests[code]++
}

func (h *Handler) serveMetrics(w http.ResponseWriter, r *http.Request) {
	m := &h.metrics
	var b strings.Builder
	series := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	series("goai_runs_active", "gauge", "Runs in flight in this process.")
	fmt.Fprintf(&b, "goai_runs_active %d\n", h.activeRuns())
	series("goai_runs_started_total", "counter", "Runs started.")
	fmt.Fprintf(&b, "goai_runs_started_total %d\n", m.started.Load())
	series("goai_streams_open", "gauge", "Durable log streams being served.")
	fmt.Fprintf(&b, "goai_streams_open %d\n", m.streams.Load())
	series("goai_streams_taken_over", "gauge", "Durable log streams whose connections the handler took over from net/http while they wait (Config.ReleaseIdleAfter).")
	fmt.Fprintf(&b, "goai_streams_taken_over %d\n", h.conns.count())
	series("goai_events_appended_total", "counter", "Events appended to durable run logs.")
	fmt.Fprintf(&b, "goai_events_appended_total %d\n", m.events.Load())
	series("goai_panics_recovered_total", "counter", "Panics recovered; each ended one run or request.")
	fmt.Fprintf(&b, "goai_panics_recovered_total %d\n", m.panics.Load())
	if cc, ok := h.cfg.Store.(durable.CommitCounter); ok {
		cs := cc.CommitStats()
		series("goai_store_commits_total", "counter", "Store transactions committed that carried writes (group commits).")
		fmt.Fprintf(&b, "goai_store_commits_total %d\n", cs.Commits)
		series("goai_store_writes_total", "counter", "Writes carried by those commits; over goai_store_commits_total, the writes a commit shares.")
		fmt.Fprintf(&b, "goai_store_writes_total %d\n", cs.Writes)
	}

	m.mu.Lock()
	series("goai_runs_finished_total", "counter", "Runs finished, by outcome.")
	for _, k := range sortedKeys(m.finished) {
		fmt.Fprintf(&b, "goai_runs_finished_total{outcome=%q} %d\n", k, m.finished[k])
	}
	series("goai_append_duration_seconds", "histogram", "Latency of one durable log append (a batch).")
	var cum int64
	for i, le := range appendBuckets {
		cum += m.buckets[i]
		fmt.Fprintf(&b, "goai_append_duration_seconds_bucket{le=%q} %d\n", strconv.FormatFloat(le, 'g', -1, 64), cum)
	}
	cum += m.buckets[len(appendBuckets)]
	fmt.Fprintf(&b, "goai_append_duration_seconds_bucket{le=\"+Inf\"} %d\n", cum)
	fmt.Fprintf(&b, "goai_append_duration_seconds_sum %g\ngoai_append_duration_seconds_count %d\n", m.latSum, m.latCount)
	series("goai_http_requests_total", "counter", "HTTP requests, by status code.")
	codes := make([]int, 0, len(m.requests))
	for c := range m.requests {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		fmt.Fprintf(&b, "goai_http_requests_total{code=\"%d\"} %d\n", c, m.requests[c])
	}
	m.mu.Unlock()

	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(b.String()))
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
