package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/server"
)

// waitingModel streams the start of an answer, then waits until released
// before it finishes: a model between two tokens for as long as a test
// needs (one parked in reading its provider's response). With flood set,
// it sends that many deltas of 16 KiB after the release: far more than
// the socket buffers between a server and its client hold.
type waitingModel struct {
	parked  chan struct{} // one send per call, as it starts waiting
	release chan struct{}
	flood   int
}

// newWaitingModel returns a model whose parked channel holds n sends.
func newWaitingModel(n int) *waitingModel {
	return &waitingModel{parked: make(chan struct{}, n), release: make(chan struct{})}
}

func (*waitingModel) Name() string  { return "waiting" }
func (*waitingModel) Model() string { return "waiting-1" }

func (m *waitingModel) ChatStream(ctx context.Context, req *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		if !m.start(req, yield) {
			return
		}
		m.parked <- struct{}{}
		select {
		case <-m.release:
		case <-ctx.Done():
			return
		}
		m.finish(req, yield)
	}
}

// start and finish hold the events, so that the frame that waits is as
// small as a real adapter's (stack_test.go measures it).
//
//go:noinline
func (m *waitingModel) start(req *chat.Request, yield func(agui.Event, error) bool) bool {
	for _, ev := range []agui.Event{
		{Type: agui.RunStarted, ThreadID: req.ThreadID, RunID: req.RunID},
		{Type: agui.TextMessageStart, MessageID: "m1", Role: "assistant"},
		{Type: agui.TextMessageContent, MessageID: "m1", Delta: "first "},
	} {
		if !yield(ev, nil) {
			return false
		}
	}
	return true
}

//go:noinline
func (m *waitingModel) finish(req *chat.Request, yield func(agui.Event, error) bool) {
	if m.flood > 0 {
		chunk := strings.Repeat("x", 16<<10)
		for range m.flood {
			if !yield(agui.Event{Type: agui.TextMessageContent, MessageID: "m1", Delta: chunk}, nil) {
				return
			}
		}
	}
	for _, ev := range []agui.Event{
		{Type: agui.TextMessageContent, MessageID: "m1", Delta: "second"},
		{Type: agui.TextMessageEnd, MessageID: "m1"},
		{Type: agui.RunFinished, ThreadID: req.ThreadID, RunID: req.RunID, FinishReason: agui.FinishStop},
	} {
		if !yield(ev, nil) {
			return
		}
	}
}

// metric reads one series of h's /metrics.
func metric(t *testing.T, h http.Handler, name string) int64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	v, ok := metricValue(t, rec.Body.String(), name)
	if !ok {
		t.Fatalf("/metrics has no %s:\n%s", name, rec.Body)
	}
	return v
}

// readTakenOver reads res's body until the first token, waits for the
// stream to be taken over, releases the model and returns the whole
// body read.
func readTakenOver(t *testing.T, h http.Handler, model *waitingModel, body io.Reader) *bytes.Buffer {
	t.Helper()
	var got bytes.Buffer
	br := bufio.NewReader(io.TeeReader(body, &got))
	readLine(t, br, `"delta":"first "`)
	<-model.parked
	waitFor(t, "the waiting stream taken over", func() bool { return metric(t, h, "goai_streams_taken_over") == 1 })
	close(model.release)
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("the taken-over stream's body: %v", err)
	}
	return &got
}

// checkWholeLog checks that fs are every entry of run r1's log in store,
// once, in order, ending with RUN_FINISHED.
func checkWholeLog(t *testing.T, fs []agui.Frame, store durable.Store) {
	t.Helper()
	all := logEvents(t, store, "r1")
	if len(fs) != len(all) || len(fs) == 0 || !strings.Contains(string(fs[len(fs)-1].Data), `"RUN_FINISHED"`) {
		t.Fatalf("%d frames, the log has %d entries: %+v", len(fs), len(all), fs)
	}
	for i, f := range fs {
		if want := fmt.Sprintf(":%d", i+1); !strings.HasSuffix(f.ID, want) {
			t.Fatalf("frame %d has id %q, want the log's entry %d", i, f.ID, i+1)
		}
	}
}

// readLine reads SSE lines from br until one contains s.
func readLine(t *testing.T, br *bufio.Reader, s string) {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream before %q: %v", s, err)
		}
		if strings.Contains(line, s) {
			return
		}
	}
}

// A stream that waits is taken over from net/http: it delivers the rest of
// its run in order, ends cleanly, and its connection serves the client's
// next request (the response said keep-alive).
func TestWaitingStreamIsTakenOverAndItsConnectionKept(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			model := newWaitingModel(16)
			store := newStore(t)
			e := newItemEnv(t, store, model, nil)
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()

			req, _ := http.NewRequest(http.MethodPost, e.url(), strings.NewReader(chatBody("t1", "r1")))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Run-Id", "r1")
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			checkWholeLog(t, frames(t, readTakenOver(t, e.h, model, res.Body)), store)
			all := logEvents(t, store, "r1")
			res.Body.Close()
			waitFor(t, "the stream forgotten", func() bool { return metric(t, e.h, "goai_streams_taken_over") == 0 })

			// The same connection serves the next request.
			reused := false
			trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
			join, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, e.url()+"?runId=r1&offset=-1", nil)
			res2, err := client.Do(join)
			if err != nil {
				t.Fatal(err)
			}
			defer res2.Body.Close()
			if n := len(frames(t, res2.Body)); res2.StatusCode != http.StatusOK || n != len(all) {
				t.Fatalf("the join after: status %d, %d frames, want %d", res2.StatusCode, n, len(all))
			}
			if !reused {
				t.Fatal("the client's next request did not reuse the taken-over connection")
			}
		})
	}
}

// A client leaving a taken-over stream is noticed without a read of its
// connection: the run, still produced here, is stamped detached.
func TestTakenOverClientLeavingDetachesTheRun(t *testing.T) {
	for name, newStore := range backends() {
		t.Run(name, func(t *testing.T) {
			model := newWaitingModel(16)
			store := newStore(t)
			e := newItemEnv(t, store, model, nil)
			defer close(model.release)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := post(t, ctx, e.url(), map[string]string{"X-Run-Id": "r1"}, chatBody("t1", "r1"))
			defer res.Body.Close()
			readLine(t, bufio.NewReader(res.Body), `"delta":"first "`)
			<-model.parked
			waitFor(t, "the waiting stream taken over", func() bool { return metric(t, e.h, "goai_streams_taken_over") == 1 })

			cancel() // the client goes away
			waitFor(t, "the run stamped detached", func() bool {
				rec, err := store.Get(context.Background(), "r1")
				return err == nil && rec.DetachedSince != nil
			})
			waitFor(t, "the stream forgotten", func() bool { return metric(t, e.h, "goai_streams_taken_over") == 0 })
			if rec, _ := store.Get(context.Background(), "r1"); rec.Status != durable.StatusRunning {
				t.Fatalf("the run went %s when its client left; it goes on", rec.Status)
			}
		})
	}
}

// Handler.Shutdown cuts a taken-over stream short (no last chunk: the
// client sees a broken body and resumes), where net/http's Shutdown does
// not reach it.
func TestShutdownCutsTakenOverStreams(t *testing.T) {
	model := newWaitingModel(16)
	e := newItemEnv(t, durable.NewMemory(nil), model, nil)
	defer close(model.release)
	res := post(t, context.Background(), e.url(), map[string]string{"X-Run-Id": "r1"}, chatBody("t1", "r1"))
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	readLine(t, br, `"delta":"first "`)
	<-model.parked
	waitFor(t, "the waiting stream taken over", func() bool { return metric(t, e.h, "goai_streams_taken_over") == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.h.Shutdown(ctx); err != context.Canceled {
		t.Fatalf("Shutdown with a stream left: %v, want context.Canceled", err)
	}
	if _, err := io.ReadAll(br); err != io.ErrUnexpectedEOF {
		t.Fatalf("the cut stream's body ended with %v, want io.ErrUnexpectedEOF", err)
	}
}

// A client that sends its next request while its stream is taken over (an
// HTTP/1.1 pipeline) gets it answered after the stream, in order: nothing
// it sent is lost to the takeover.
func TestTakenOverConnectionKeepsPipelinedRequests(t *testing.T) {
	for _, when := range []string{"before", "after"} {
		t.Run("sent "+when+" the takeover", func(t *testing.T) {
			model := newWaitingModel(16)
			store := durable.NewMemory(nil)
			e := newItemEnv(t, store, model, nil)
			conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			b := chatBody("t1", "r1")
			fmt.Fprintf(conn, "POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Run-Id: r1\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
			br := bufio.NewReader(conn)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body := bufio.NewReader(res.Body)
			readLine(t, body, `"delta":"first "`)
			<-model.parked
			next := "GET /api/chat?runId=r1&offset=-1 HTTP/1.1\r\nHost: x\r\n\r\n"
			if when == "before" {
				fmt.Fprint(conn, next)
			}
			waitFor(t, "the waiting stream taken over", func() bool { return metric(t, e.h, "goai_streams_taken_over") == 1 })
			if when == "after" {
				fmt.Fprint(conn, next)
			}
			close(model.release)
			fs := frames(t, body)
			if len(fs) == 0 || !strings.Contains(string(fs[len(fs)-1].Data), `"RUN_FINISHED"`) {
				t.Fatalf("the stream did not end with RUN_FINISHED: %+v", fs)
			}
			res2, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("the pipelined request was not answered: %v", err)
			}
			defer res2.Body.Close()
			if n, want := len(frames(t, res2.Body)), len(logEvents(t, store, "r1")); res2.StatusCode != http.StatusOK || n != want {
				t.Fatalf("the pipelined join: status %d, %d frames, want %d", res2.StatusCode, n, want)
			}
		})
	}
}

// An NDJSON stream is taken over as an SSE one is: the same frames, every
// entry once, in order, across the takeover.
func TestTakenOverNDJSONStream(t *testing.T) {
	model := newWaitingModel(16)
	store := durable.NewMemory(nil)
	e := newItemEnv(t, store, model, nil)
	res := post(t, context.Background(), e.url()+"?format=ndjson", map[string]string{"X-Run-Id": "r1"}, chatBody("t1", "r1"))
	defer res.Body.Close()
	var fs []agui.Frame
	for f, err := range agui.ReadNDJSON(readTakenOver(t, e.h, model, res.Body)) {
		if err != nil {
			t.Fatalf("reading NDJSON: %v", err)
		}
		fs = append(fs, f)
	}
	checkWholeLog(t, fs, store)
}

// A client that stops reading a taken-over stream is let go once a write
// has stalled for the bound: the stream's goroutine does not wait on it
// forever, and the run goes on without it (stamped detached, unless it
// already ended).
func TestTakenOverStreamLetsAStalledClientGo(t *testing.T) {
	model := newWaitingModel(16)
	model.flood = 2000 // 32 MB
	store := durable.NewMemory(nil)
	e := newItemEnv(t, store, model, nil)
	server.SetStalledWrite(e.h, 100*time.Millisecond)

	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	b := chatBody("t1", "r1")
	fmt.Fprintf(conn, "POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Run-Id: r1\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	readLine(t, bufio.NewReader(res.Body), `"delta":"first "`)
	<-model.parked
	waitFor(t, "the waiting stream taken over", func() bool { return metric(t, e.h, "goai_streams_taken_over") == 1 })

	close(model.release) // the flood begins; the client reads nothing more
	waitFor(t, "the stalled stream let go", func() bool { return metric(t, e.h, "goai_streams_taken_over") == 0 })
	waitFor(t, "the run stamped detached or ended", func() bool {
		rec, err := store.Get(context.Background(), "r1")
		return err == nil && (rec.DetachedSince != nil || rec.Status != durable.StatusRunning)
	})
}
