package server_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/postgres"
	"github.com/goai-sdk/goai/durable/sqlite"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/server"
)

// backends returns a fresh store of each embedded backend.
func backends() map[string]func(t *testing.T) durable.Store {
	m := map[string]func(t *testing.T) durable.Store{
		"memory": func(t *testing.T) durable.Store { return durable.NewMemory(nil) },
		"sqlite": func(t *testing.T) durable.Store {
			s, err := sqlite.Open(filepath.Join(t.TempDir(), "goai.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Shutdown() })
			return s
		},
	}
	if os.Getenv("GOAI_TEST_POSTGRES") != "" {
		m["postgres"] = func(t *testing.T) durable.Store {
			s, err := postgres.Open(context.Background(), newPGSchema(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Shutdown() })
			return s
		}
	}
	return m
}

func wire(t *testing.T, e agui.Event) []byte {
	t.Helper()
	return agui.AppendWire(nil, &e)
}

func decode(t *testing.T, data []byte) agui.Event {
	t.Helper()
	var ev agui.Event
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("log entry %s: %v", data, err)
	}
	return ev
}

// deadProducer leaves the state a server killed mid-run leaves: a running
// record claimed at epoch 1, an open log with some events, no heartbeat
// since.
func deadProducer(t *testing.T, s durable.Store, run string) durable.Claim {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateOrResume(ctx, durable.RunRecord{RunID: run, ThreadID: "t1", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c, err := s.(durable.Leaser).ClaimIf(ctx, run, 0)
	if err != nil {
		t.Fatal(err)
	}
	batch := [][]byte{
		wire(t, agui.Event{Type: agui.Custom, Name: server.RunAcceptedEvent, Value: json.RawMessage("{}")}),
		wire(t, agui.Event{Type: agui.RunStarted, ThreadID: "t1", RunID: run}),
		wire(t, agui.Event{Type: agui.TextMessageStart, MessageID: "m1", Role: "assistant"}),
		wire(t, agui.Event{Type: agui.TextMessageContent, MessageID: "m1", Delta: "half a"}),
	}
	if _, err := s.AppendWith(ctx, run, batch, durable.AppendOptions{Epoch: c.Epoch}); err != nil {
		t.Fatal(err)
	}
	return c
}

// A run whose producer died is reclaimed: a parked reader gets RUN_ERROR
// producer-lost and ends, the log is closed, the record failed, and the
// dead producer's epoch is fenced out.
func TestRecoveryEndsLostRun(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			dead := deadProducer(t, s, "r1")
			e := newEnv(t, slowScenario(t, 1, 0), s)
			// A reader joins and parks on the open log.
			res, err := http.Get(e.srv.URL + "/api/chat?runId=r1&offset=-1")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			got := make(chan []agui.Frame, 1)
			go func() { got <- frames(t, res.Body) }()

			released := make(chan durable.RunRecord, 1)
			rc := &server.Recovery{Store: s, Lease: 100 * time.Millisecond,
				ReleaseSandbox: func(_ context.Context, rec durable.RunRecord) error { released <- rec; return nil }}
			// A fresh lease is not reclaimed.
			if r, err := rc.Sweep(context.Background()); err != nil || r.Reclaimed != 0 {
				t.Fatalf("sweep with a fresh lease: %+v %v", r, err)
			}
			if err := s.Update(context.Background(), "r1", durable.RunPatch{SandboxKey: durable.Set("sb-1")}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(150 * time.Millisecond)
			r, err := rc.Sweep(context.Background())
			if err != nil || r.Reclaimed != 1 {
				t.Fatalf("sweep: %+v %v", r, err)
			}
			var fs []agui.Frame
			select {
			case fs = <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("the parked reader did not end after recovery")
			}
			if len(fs) != 5 {
				t.Fatalf("reader got %d frames, want 5", len(fs))
			}
			last := fs[len(fs)-1].Event
			if last.Type != agui.RunError || last.Code != server.ProducerLostCode || !strings.Contains(last.Message, "producer lost") {
				t.Fatalf("log ends with %s %q %q", last.Type, last.Code, last.Message)
			}
			rec, err := s.Get(context.Background(), "r1")
			if err != nil || rec.Status != durable.StatusFailed || rec.Error == nil || rec.Error.Code != server.ProducerLostCode || rec.FinishedAt == nil {
				t.Fatalf("record after recovery: %+v %v", rec, err)
			}
			if _, err := s.AppendWith(context.Background(), "r1", [][]byte{[]byte(`{}`)}, durable.AppendOptions{Epoch: dead.Epoch}); !errors.Is(err, durable.ErrClaimLost) {
				t.Fatalf("the dead producer's append after recovery: %v, want ErrClaimLost", err)
			}
			if err := s.(durable.Leaser).Heartbeat(context.Background(), dead); !errors.Is(err, durable.ErrClaimLost) {
				t.Fatalf("the dead producer's heartbeat after recovery: %v, want ErrClaimLost", err)
			}
			if rec := <-released; rec.SandboxKey == nil || *rec.SandboxKey != "sb-1" {
				t.Fatalf("sandbox hook got %+v", rec)
			}
			// Idempotent: a second sweep (or another replica's) finds nothing.
			if r, err := rc.Sweep(context.Background()); err != nil || r != (server.SweepResult{}) {
				t.Fatalf("second sweep: %+v %v", r, err)
			}
		})
	}
}

// A producer that closed its log and died before recording the outcome:
// recovery takes the outcome from the log and appends nothing.
func TestRecoveryFinishesFromClosedLog(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			ctx := context.Background()
			c := deadProducer(t, s, "r1")
			if _, err := s.AppendWith(ctx, "r1", [][]byte{wire(t, agui.Event{Type: agui.RunFinished, ThreadID: "t1", RunID: "r1", FinishReason: "stop"})}, durable.AppendOptions{Epoch: c.Epoch}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(ctx, "r1"); err != nil {
				t.Fatal(err)
			}
			rc := &server.Recovery{Store: s, Lease: time.Millisecond}
			time.Sleep(5 * time.Millisecond)
			r, err := rc.Sweep(ctx)
			if err != nil || r.Finished != 1 || r.Reclaimed != 0 {
				t.Fatalf("sweep: %+v %v", r, err)
			}
			rec, _ := s.Get(ctx, "r1")
			if rec.Status != durable.StatusCompleted || rec.Error != nil {
				t.Fatalf("record: %+v", rec)
			}
			entries, _ := s.Snapshot(ctx, "r1")
			if last := decode(t, entries[len(entries)-1].Data); last.Type != agui.RunFinished || len(entries) != 5 {
				t.Fatalf("log changed: %d entries, last %s", len(entries), last.Type)
			}
		})
	}
}

// A live producer keeps its lease: a sweeper with a short lease running
// all along never takes its run, which finishes normally.
func TestRecoveryLeavesLiveProducerAlone(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			e := newEnv(t, slowScenario(t, 30, 40), s)
			e.h.SetHeartbeat(25 * time.Millisecond)
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			rc := &server.Recovery{Store: s, Lease: 600 * time.Millisecond, Interval: 10 * time.Millisecond}
			wg.Go(func() { rc.Run(ctx) })
			defer func() { stop(); wg.Wait() }()
			res := post(t, context.Background(), e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
			fs := frames(t, res.Body)
			res.Body.Close()
			if last := fs[len(fs)-1].Event; last.Type != agui.RunFinished {
				t.Fatalf("run ended with %s %q %q", last.Type, last.Code, last.Message)
			}
			e.h.Wait()
			rec, _ := s.Get(context.Background(), "r1")
			if rec.Status != durable.StatusCompleted || rec.DriverEpoch == nil || *rec.DriverEpoch != 1 {
				t.Fatalf("record: status %s epoch %v", rec.Status, rec.DriverEpoch)
			}
		})
	}
}

// A producer whose run is taken over (here: a successor's claim, as
// recovery does for a producer it believes dead) stops at its next
// heartbeat, runs no further, and appends nothing after the claim.
func TestTakenOverProducerStops(t *testing.T) {
	s := durable.NewMemory(nil)
	e := newEnv(t, slowScenario(t, 500, 10), s)
	e.h.SetHeartbeat(20 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := post(t, ctx, e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
	if fs, _ := readFrames(bufio.NewReader(res.Body), 5); len(fs) != 5 {
		t.Fatalf("the stream ended after %d events", len(fs))
	}
	claimAndWaitForStop(t, e, s, "r1")
	cancel()
	res.Body.Close()
}

// claimAndWaitForStop claims runID as a successor would and waits until
// this handler's producer of it has stopped, having appended nothing more
// and left the record running for the successor.
func claimAndWaitForStop(t *testing.T, e *env, s *durable.Memory, runID string) {
	t.Helper()
	if _, err := s.Claim(context.Background(), runID); err != nil {
		t.Fatal(err)
	}
	atClaim, _ := s.Snapshot(context.Background(), runID)
	done := make(chan struct{})
	go func() { e.h.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the superseded producer kept running")
	}
	if after, _ := s.Snapshot(context.Background(), runID); len(after) != len(atClaim) {
		t.Fatalf("the superseded producer appended %d entries after the successor's claim", len(after)-len(atClaim))
	}
	if rec, _ := s.Get(context.Background(), runID); rec.Status != durable.StatusRunning {
		t.Fatalf("the superseded producer finalized the record: %s", rec.Status)
	}
}

// Two replicas on one store: a fresh POST repeated on the other replica
// never starts a second producer, it is served the one log.
func TestDuplicateFreshPostOnOtherReplica(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			a := newEnv(t, slowScenario(t, 10, 10), s)
			b := newEnv(t, slowScenario(t, 10, 10), s)
			ra := post(t, context.Background(), a.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
			br := bufio.NewReader(ra.Body)
			for _, err := range agui.ReadSSE(br) {
				if err != nil {
					t.Fatal(err)
				}
				break // A is producing
			}
			rb := post(t, context.Background(), b.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
			fb := frames(t, rb.Body)
			rb.Body.Close()
			io.Copy(io.Discard, br)
			ra.Body.Close()
			a.h.Wait()
			b.h.Wait()
			if na, nb := len(a.adapter.Calls()), len(b.adapter.Calls()); na+nb != 1 {
				t.Fatalf("model called %d times on A and %d on B, want once in all", na, nb)
			}
			accepted := 0
			for _, f := range fb {
				if f.Event.Type == agui.Custom && f.Event.Name == server.RunAcceptedEvent {
					accepted++
				}
			}
			if last := fb[len(fb)-1].Event; last.Type != agui.RunFinished || accepted != 1 {
				t.Fatalf("B served %d frames with %d run.accepted markers, last %s", len(fb), accepted, last.Type)
			}
			// And after the run ended, a re-POST of it serves its log again.
			rc := post(t, context.Background(), b.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
			fc := frames(t, rc.Body)
			rc.Body.Close()
			if len(fc) != len(fb) || len(b.adapter.Calls()) != 0 {
				t.Fatalf("re-POST of a finished run: %d frames (want %d), %d model calls on B", len(fc), len(fb), len(b.adapter.Calls()))
			}
		})
	}
}

// Bad resume input gets 400 naming the offset; an unknown run gets 404.
func TestResumeBadInput(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			e := newEnv(t, slowScenario(t, 3, 0), s)
			res := post(t, context.Background(), e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
			live := frames(t, res.Body)
			res.Body.Close()
			res = post(t, context.Background(), e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r2"}, strings.Replace(body, `"r1"`, `"r2"`, 1))
			other := frames(t, res.Body)
			res.Body.Close()
			e.h.Wait()
			do := func(method, q string, hdr http.Header) (int, string) {
				t.Helper()
				var rd io.Reader
				if method == http.MethodPost {
					rd = strings.NewReader(body)
				}
				req, _ := http.NewRequest(method, e.srv.URL+"/api/chat"+q, rd)
				if rd != nil {
					req.Header.Set("Content-Type", "application/json")
				}
				for k, vs := range hdr {
					for _, v := range vs {
						req.Header.Add(k, v)
					}
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return res.StatusCode, string(b)
			}
			mid := live[2].ID
			foreign := other[2].ID
			for _, c := range []struct {
				what, method, q string
				hdr             http.Header
				code            int
				names           string
			}{
				{"malformed", "GET", "?runId=r1&offset=bogus", nil, 400, "bogus"},
				{"malformed header", "POST", "", http.Header{"X-Run-Id": {"r1"}, "Last-Event-Id": {"zz:9"}}, 400, "zz:9"},
				{"foreign", "GET", "?runId=r1&offset=" + foreign, nil, 400, foreign},
				{"foreign on POST", "POST", "", http.Header{"X-Run-Id": {"r1"}, "Last-Event-Id": {foreign}}, 400, foreign},
				{"future", "GET", "?runId=r1&offset=" + strings.Replace(mid, ":3", ":99", 1), nil, 400, ":99"},
				{"repeated query", "GET", "?runId=r1&offset=" + mid + "&offset=-1", nil, 400, "repeated offset"},
				{"repeated header", "POST", "", http.Header{"X-Run-Id": {"r1"}, "Last-Event-Id": {mid, mid}}, 400, "repeated Last-Event-ID"},
				{"repeated X-Run-Id on a fresh POST", "POST", "", http.Header{"X-Run-Id": {"r9", "r9"}}, 400, "repeated X-Run-Id"},
				{"padded", "GET", "?runId=r1&offset=%20" + mid, nil, 400, mid},
				{"unknown run, join", "GET", "?runId=nope&offset=-1", nil, 404, "nope"},
				{"unknown run, POST resume", "POST", "", http.Header{"X-Run-Id": {"nope"}, "Last-Event-Id": {durable.FormatOffset(cmp.Or(map[string]string{"postgres": "pg"}[name], name), "nope", 3)}}, 404, "nope"},
			} {
				code, b := do(c.method, c.q, c.hdr)
				if code != c.code || !strings.Contains(b, c.names) {
					t.Errorf("%s: %d %s, want %d naming %q", c.what, code, strings.TrimSpace(b), c.code, c.names)
				}
			}
			if n := len(e.adapter.Calls()); n != 2 {
				t.Fatalf("bad requests ran the model: %d calls, want the 2 good runs", n)
			}
			// A good resume still works.
			code, b := do("GET", "?runId=r1&offset="+mid, nil)
			if fs := frames(t, strings.NewReader(b)); code != 200 || len(fs) != len(live)-3 || fs[0].ID != live[3].ID {
				t.Fatalf("resume from the 3rd entry: %d, %d frames", code, len(fs))
			}
		})
	}
}

// A reader that stops reading never slows the producer or other readers.
func TestSlowReaderDoesNotSlowProducer(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			// ~8 MB of deltas: far more than socket buffers hold.
			var sb strings.Builder
			sb.WriteString(`{"name":"big","turns":[[{"type":"RUN_STARTED","threadId":"t1","runId":"r1"},{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`)
			chunk := strings.Repeat("x", 32<<10)
			for i := 0; i < 256; i++ {
				sb.WriteString(`,{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"` + chunk + `"}`)
			}
			sb.WriteString(`,{"type":"TEXT_MESSAGE_END","messageId":"m1"},{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","finishReason":"stop"}]]}`)
			sc, err := scripted.Parse([]byte(sb.String()))
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, sc, s)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stalled := post(t, ctx, e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
			defer stalled.Body.Close() // never read until the end
			done := make(chan struct{})
			go func() { e.h.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the producer is held up by a reader that does not read")
			}
			// Another reader joins and gets everything while the first still stalls.
			res, err := http.Get(e.srv.URL + "/api/chat?runId=r1&offset=-1")
			if err != nil {
				t.Fatal(err)
			}
			fs := frames(t, res.Body)
			res.Body.Close()
			if last := fs[len(fs)-1].Event; last.Type != agui.RunFinished || len(fs) < 259 {
				t.Fatalf("second reader: %d frames, last %s", len(fs), last.Type)
			}
			cancel()
		})
	}
}

// The reaper cancels a detached run past its TTL: its live producer stops
// within its cancel poll and ends the log with RUN_ERROR cancelled; the
// reaper never clears DetachedSince.
func TestReaperCancelsExpiredDetachedRun(t *testing.T) {
	s := durable.NewMemory(nil)
	e := newEnv(t, slowScenario(t, 500, 10), s)
	res := post(t, context.Background(), e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
	defer res.Body.Close()
	stream := make(chan []agui.Frame, 1)
	go func() { stream <- frames(t, res.Body) }()
	time.Sleep(50 * time.Millisecond)
	rc := &server.Recovery{Store: s, DetachedTTL: time.Hour}
	if r, err := rc.Sweep(context.Background()); err != nil || r.Expired != 0 {
		t.Fatalf("sweep before any detach: %+v %v", r, err)
	}
	detached := time.Now().Add(-2 * time.Hour)
	if err := s.Update(context.Background(), "r1", durable.RunPatch{DetachedSince: durable.Set(detached), SandboxKey: durable.Set("sb")}); err != nil {
		t.Fatal(err)
	}
	if r, err := rc.Sweep(context.Background()); err != nil || r.Expired != 1 {
		t.Fatalf("sweep: %+v %v", r, err)
	}
	var fs []agui.Frame
	select {
	case fs = <-stream:
	case <-time.After(5 * time.Second):
		t.Fatal("the expired run kept running")
	}
	if last := fs[len(fs)-1].Event; last.Type != agui.RunError || last.Code != "cancelled" {
		t.Fatalf("log ends with %s %q", last.Type, last.Code)
	}
	e.h.Wait()
	rec, _ := s.Get(context.Background(), "r1")
	if rec.Status != durable.StatusAborted || rec.DetachedSince == nil || rec.CancelRequested == nil || !*rec.CancelRequested {
		t.Fatalf("record: status %s detachedSince %v cancel %v", rec.Status, rec.DetachedSince, rec.CancelRequested)
	}
	if r, err := rc.Sweep(context.Background()); err != nil || r != (server.SweepResult{}) {
		t.Fatalf("sweep after the run ended: %+v %v", r, err)
	}
}

// slowStopAdapter streams a little; once stopped, it reports stopping and
// ends only when released: a coding agent being stopped in its sandbox.
type slowStopAdapter struct{ stopping, release chan struct{} }

func (slowStopAdapter) Name() string  { return "slow-stop" }
func (slowStopAdapter) Model() string { return "m" }
func (a slowStopAdapter) ChatStream(ctx context.Context, _ *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		for _, e := range []agui.Event{
			{Type: agui.TextMessageStart, MessageID: "m1", Role: "assistant"},
			{Type: agui.TextMessageContent, MessageID: "m1", Delta: "working"},
		} {
			if !yield(e, nil) {
				return
			}
		}
		<-ctx.Done()
		close(a.stopping)
		<-a.release
		yield(agui.Event{}, ctx.Err())
	}
}

// A cancelled producer keeps its lease while it winds down: with the
// store's clock moved past the lease while the model is stopping, a fresh
// heartbeat comes, recovery finds nothing to take over, and the run ends
// cancelled at its first driver's epoch.
func TestCancelledProducerKeepsItsLease(t *testing.T) {
	const lease = time.Minute
	var skew atomic.Int64
	s := durable.NewMemory(&durable.MemoryOptions{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	a := slowStopAdapter{stopping: make(chan struct{}), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(a.release) }) }
	e := newItemEnv(t, s, a, nil)
	t.Cleanup(release) // runs before the env's cleanup waits for the producer
	e.h.SetHeartbeat(10 * time.Millisecond)
	res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1"}, body)
	defer res.Body.Close()
	sawText, done := make(chan struct{}), make(chan []agui.Frame, 1)
	go func() {
		done <- readUntil(t, res.Body, func(f agui.Frame) bool {
			if f.Event.Type == agui.TextMessageContent {
				close(sawText)
			}
			return false
		})
	}()
	<-sawText
	post(t, context.Background(), e.srv.URL+"/api/chat/cancel", nil, `{"runId":"r1"}`).Body.Close()
	<-a.stopping
	skew.Store(int64(2 * lease)) // every heartbeat so far is now past the lease
	waitFor(t, "a heartbeat from the stopping producer", func() bool {
		stale, err := s.ListStale(context.Background(), lease)
		return err == nil && len(stale) == 0
	})
	rc := &server.Recovery{Store: s, Lease: lease}
	if got, err := rc.Sweep(context.Background()); err != nil || got != (server.SweepResult{}) {
		t.Fatalf("recovery swept %+v, %v while the producer was stopping", got, err)
	}
	release()
	fs := <-done
	if len(fs) == 0 {
		t.Fatal("the stream ended with nothing")
	}
	if last := fs[len(fs)-1].Event; last.Type != agui.RunError || last.Code != "cancelled" {
		t.Fatalf("the run ended with %s %q %q, want RUN_ERROR cancelled", last.Type, last.Code, last.Message)
	}
	e.h.Wait()
	if rec, _ := s.Get(context.Background(), "r1"); rec.DriverEpoch == nil || *rec.DriverEpoch != 1 {
		t.Fatalf("record: status %s epoch %v: recovery claimed the run", rec.Status, rec.DriverEpoch)
	}
}

// noCancelLister hides the store's durable.CancelLister (keeping its
// leases), so that each producer polls its own record.
type noCancelLister struct {
	durable.Store
	durable.Leaser
}

// A cancel recorded in the store by someone else (another replica, the
// reaper) stops the producer: through the handler's one poller when the
// store lists cancels in one query, through each producer's own polls
// when it cannot.
func TestCancelRecordedElsewhereStopsProducer(t *testing.T) {
	mem := func() durable.Store { return durable.NewMemory(nil) }
	for name, newStore := range map[string]func() durable.Store{
		"one poller":    mem,
		"per-run polls": func() durable.Store { s := mem(); return noCancelLister{s, s.(durable.Leaser)} },
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore()
			_, lists := s.(durable.CancelLister)
			if lists != (name == "one poller") {
				t.Fatalf("store lists cancels: %v", lists)
			}
			e := newItemEnv(t, s, scripted.New(slowScenario(t, 500, 10)), nil)
			res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1"}, body)
			defer res.Body.Close()
			recorded := false
			fs := readUntil(t, res.Body, func(f agui.Frame) bool {
				if f.Event.Type == agui.TextMessageContent && !recorded {
					recorded = true
					if err := s.Update(context.Background(), "r1", durable.RunPatch{CancelRequested: durable.Set(true)}); err != nil {
						t.Fatal(err)
					}
				}
				return false
			})
			if last := fs[len(fs)-1].Event; last.Type != agui.RunError || last.Code != "cancelled" {
				t.Fatalf("the run ended with %s %q %q, want RUN_ERROR cancelled", last.Type, last.Code, last.Message)
			}
		})
	}
}

// A producer whose claim a successor took stops at its next heartbeat even
// while its model is silent (no append to be refused): through one batch
// renewal when the store can, else through its own heartbeat.
func TestRefusedHeartbeatStopsSilentProducer(t *testing.T) {
	for name, wrap := range map[string]func(*durable.Memory) durable.Store{
		"batch":   func(m *durable.Memory) durable.Store { return m },
		"per run": func(m *durable.Memory) durable.Store { return noCancelLister{m, m} },
	} {
		t.Run(name, func(t *testing.T) {
			mem := durable.NewMemory(nil)
			s := wrap(mem)
			if _, batch := s.(durable.BatchLeaser); batch != (name == "batch") {
				t.Fatalf("store renews in batches: %v", batch)
			}
			// The model pauses a minute before its first token.
			e := newEnv(t, slowScenario(t, 2, 60_000), s)
			e.h.SetHeartbeat(10 * time.Millisecond)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := post(t, ctx, e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
			defer res.Body.Close()
			if fs, _ := readFrames(bufio.NewReader(res.Body), 3); len(fs) != 3 || fs[2].Event.Type != agui.TextMessageStart {
				t.Fatalf("the stream ended after %d events", len(fs))
			}
			claimAndWaitForStop(t, e, mem, "r1")
		})
	}
}
