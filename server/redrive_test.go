package server_test

import (
	"bufio"
	"context"
	"errors"
	"iter"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/server"
)

// journalAdapter stands in for a coding agent whose work outlives its
// host: it replays a fixed event sequence, deterministically, from the
// start on every call. A launch (not an attach) with pauseAfter > 0 stops
// after that many events and waits, like an agent still working when its
// host dies.
type journalAdapter struct {
	events     []agui.Event
	pauseAfter int
	// attachPauseAfter > 0 makes an attach stop after that many events and
	// wait, like a slow journal read.
	attachPauseAfter int
	launches         int
}

func (a *journalAdapter) Name() string    { return "journal" }
func (a *journalAdapter) Model() string   { return "m" }
func (a *journalAdapter) CanAttach() bool { return true }
func (a *journalAdapter) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	if !req.Attach {
		a.launches++
	}
	return func(yield func(agui.Event, error) bool) {
		for i, ev := range a.events {
			if (!req.Attach && a.pauseAfter > 0 && i == a.pauseAfter) || (req.Attach && a.attachPauseAfter > 0 && i == a.attachPauseAfter) {
				<-ctx.Done()
				yield(agui.Event{}, context.Cause(ctx))
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func agentEvents(deltas ...string) []agui.Event {
	evs := []agui.Event{{Type: agui.RunStarted, ThreadID: "t1", RunID: "r1", Model: "m"}, {Type: agui.TextMessageStart, MessageID: "msg-1", Role: "assistant"}}
	for _, d := range deltas {
		evs = append(evs, agui.Event{Type: agui.TextMessageContent, MessageID: "msg-1", Delta: d})
	}
	return append(evs, agui.Event{Type: agui.TextMessageEnd, MessageID: "msg-1"}, agui.Event{Type: agui.RunFinished, ThreadID: "t1", RunID: "r1", FinishReason: agui.FinishStop})
}

func journalHandler(t *testing.T, s durable.Store, a chat.Adapter) (*server.Handler, *httptest.Server) {
	t.Helper()
	h := server.ChatHandler(server.Config{
		Options: func(*server.Request) (chat.Options, error) {
			return chat.Options{Adapter: a, Debug: chat.DebugNone()}, nil
		},
		Store:      s,
		CancelPoll: 20 * time.Millisecond,
	})
	h.SetHeartbeat(10 * time.Millisecond)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		h.StopAll(context.Canceled)
		h.Wait()
	})
	return h, srv
}

// killedMidRun runs r1 on a first server until the client has seen n
// events, then lets the client leave and the server's producer die as a
// killed server's would: the log open, the record running, no heartbeat.
func killedMidRun(t *testing.T, s durable.Store, a *journalAdapter, n int) {
	t.Helper()
	h1, srv1 := journalHandler(t, s, a)
	ctx, cancel := context.WithCancel(context.Background())
	res := post(t, ctx, srv1.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
	if fs, _ := readFrames(bufio.NewReader(res.Body), n); len(fs) != n {
		t.Fatalf("the first server's stream ended after %d events", len(fs))
	}
	cancel()
	res.Body.Close()
	waitFor(t, "the detach to be recorded", func() bool {
		rec, err := s.Get(context.Background(), "r1")
		return err == nil && rec.DetachedSince != nil
	})
	h1.StopAll(errors.New("server killed"))
	h1.Wait()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// redrive sweeps until recovery hands r1 to a second server, waits for
// that server's producer to end, and returns the stored log.
func redrive(t *testing.T, s durable.Store, a chat.Adapter) []agui.Event {
	t.Helper()
	h2, _ := journalHandler(t, s, a)
	rc := &server.Recovery{Store: s, Lease: 50 * time.Millisecond, Redrive: h2.Redrive}
	waitFor(t, "recovery to re-drive the run", func() bool {
		res, err := rc.Sweep(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Reclaimed != 0 {
			t.Fatalf("recovery ended the run instead of re-driving it: %+v", res)
		}
		return res.Redriven == 1
	})
	h2.Wait()
	entries, err := s.Snapshot(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]agui.Event, len(entries))
	for i, e := range entries {
		evs[i] = decode(t, e.Data)
	}
	return evs
}

func logDeltas(evs []agui.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == agui.TextMessageContent {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

// A successor leaves the log equal to the whole transcript, with no
// duplicated prefix, and the record completed at epoch 2; the agent was
// launched once.
func TestRedriveAfterProducerDeath(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			events := agentEvents("a", "b", "c", "d", "e")
			first := &journalAdapter{events: events, pauseAfter: 4}
			killedMidRun(t, s, first, 4)
			second := &journalAdapter{events: events}
			log := redrive(t, s, second)
			if got := logDeltas(log); got != "abcde" {
				t.Errorf("deltas in the log %q, want abcde once each", got)
			}
			counts := map[agui.EventType]int{}
			for _, e := range log {
				counts[e.Type]++
			}
			if counts[agui.RunStarted] != 1 || counts[agui.TextMessageStart] != 1 || counts[agui.RunFinished] != 1 || counts[agui.Custom] != 1 {
				t.Errorf("event counts %v: want one RUN_STARTED, TEXT_MESSAGE_START, run.accepted and RUN_FINISHED", counts)
			}
			if last := log[len(log)-1]; last.Type != agui.RunFinished {
				t.Errorf("the log ends with %s", last.Type)
			}
			rec, err := s.Get(context.Background(), "r1")
			if err != nil {
				t.Fatal(err)
			}
			if rec.Status != durable.StatusCompleted || rec.DriverEpoch == nil || *rec.DriverEpoch != 2 {
				t.Errorf("record %s epoch %v, want completed at epoch 2", rec.Status, rec.DriverEpoch)
			}
			if first.launches+second.launches != 1 {
				t.Errorf("%d launches, want 1", first.launches+second.launches)
			}
		})
	}
}

// A replay that contradicts what clients were already shown ends the run
// with RUN_ERROR takeover-diverged; nothing of the contradicting replay
// is appended.
func TestRedriveDivergence(t *testing.T) {
	s := durable.NewMemory(nil)
	killedMidRun(t, s, &journalAdapter{events: agentEvents("a", "b", "c", "d"), pauseAfter: 4}, 4)
	log := redrive(t, s, &journalAdapter{events: agentEvents("a", "X", "c", "d")})
	last := log[len(log)-1]
	if last.Type != agui.RunError || last.Code != server.DivergedCode {
		t.Fatalf("the log ends with %s %q, want RUN_ERROR %s", last.Type, last.Code, server.DivergedCode)
	}
	if got := logDeltas(log); got != "ab" {
		t.Errorf("deltas in the log %q, want only what the first server stored (ab)", got)
	}
	if rec, _ := s.Get(context.Background(), "r1"); rec.Status != durable.StatusFailed || rec.Error == nil || rec.Error.Code != server.DivergedCode {
		t.Errorf("record %s %+v", rec.Status, rec.Error)
	}
}

// A run whose model cannot be attached to keeps no request and is ended
// as producer-lost, Redrive or not.
func TestRedriveRefusesPlainModels(t *testing.T) {
	s := durable.NewMemory(nil)
	e := newEnv(t, slowScenario(t, 200, 10), s)
	e.h.SetHeartbeat(10 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	res := post(t, ctx, e.srv.URL+"/api/chat", map[string]string{"X-Run-Id": "r1"}, body)
	if fs, _ := readFrames(bufio.NewReader(res.Body), 3); len(fs) != 3 {
		t.Fatalf("the stream ended after %d events", len(fs))
	}
	if _, err := s.LoadRequest(context.Background(), "r1"); !errors.Is(err, durable.ErrRunNotFound) {
		t.Errorf("a plain model's request was kept: %v", err)
	}
	cancel()
	res.Body.Close()
	h2, _ := journalHandler(t, s, &journalAdapter{})
	rc := &server.Recovery{Store: s, Lease: 50 * time.Millisecond, Redrive: h2.Redrive}
	e.h.StopAll(errors.New("server killed"))
	e.h.Wait()
	waitFor(t, "recovery to end the run", func() bool {
		res, err := rc.Sweep(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Redriven != 0 {
			t.Fatal("a plain model's run was re-driven")
		}
		rec, _ := s.Get(context.Background(), "r1")
		return rec.Status.Terminal()
	})
}

// A cancel while the successor is still replaying the stored prefix ends
// the run cancelled, right after what was stored; it is no divergence.
func TestRedriveCancelledDuringReplay(t *testing.T) {
	s := durable.NewMemory(nil)
	events := agentEvents("a", "b", "c", "d")
	killedMidRun(t, s, &journalAdapter{events: events, pauseAfter: 5}, 5)
	h2, _ := journalHandler(t, s, &journalAdapter{events: events, attachPauseAfter: 2})
	rc := &server.Recovery{Store: s, Lease: 50 * time.Millisecond, Redrive: h2.Redrive}
	waitFor(t, "recovery to re-drive the run", func() bool {
		res, err := rc.Sweep(context.Background())
		return err == nil && res.Redriven == 1
	})
	if err := s.Update(context.Background(), "r1", durable.RunPatch{CancelRequested: durable.Set(true)}); err != nil {
		t.Fatal(err)
	}
	h2.Wait()
	entries, _ := s.Snapshot(context.Background(), "r1")
	last := decode(t, entries[len(entries)-1].Data)
	if last.Type != agui.RunError || last.Code != "cancelled" {
		t.Fatalf("the log ends with %s %q %q, want RUN_ERROR cancelled", last.Type, last.Code, last.Message)
	}
	var ds []agui.Event
	for _, e := range entries {
		ds = append(ds, decode(t, e.Data))
	}
	if got := logDeltas(ds); got != "abc" {
		t.Errorf("deltas %q, want the stored abc once", got)
	}
}

// A server that is draining takes no run over: recovery leaves the run
// running (nothing appended, the claim's lease left to lapse), and a
// server with room takes it over on a later sweep.
func TestRedriveLeftWhileDraining(t *testing.T) {
	s := durable.NewMemory(nil)
	events := agentEvents("a", "b", "c", "d")
	killedMidRun(t, s, &journalAdapter{events: events, pauseAfter: 3}, 3)
	before, err := s.Snapshot(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	busy, _ := journalHandler(t, s, &journalAdapter{events: events})
	busy.Drain()
	rc := &server.Recovery{Store: s, Lease: 50 * time.Millisecond, Redrive: busy.Redrive}
	waitFor(t, "recovery to claim the run and leave it", func() bool {
		if _, err := rc.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		rec, err := s.Get(context.Background(), "r1")
		return err == nil && rec.DriverEpoch != nil && *rec.DriverEpoch >= 2
	})
	rec, _ := s.Get(context.Background(), "r1")
	after, _ := s.Snapshot(context.Background(), "r1")
	if rec.Status != durable.StatusRunning || len(after) != len(before) {
		t.Fatalf("a draining server's sweep ended the run: status %s, %d entries (had %d)", rec.Status, len(after), len(before))
	}
	if got := logDeltas(redrive(t, s, &journalAdapter{events: events})); got != "abcd" {
		t.Errorf("after the draining server left it, the run's deltas are %q, want abcd", got)
	}
}
