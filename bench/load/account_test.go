package main

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/sqlite"
	"github.com/goai-sdk/goai/provider/scripted"
	"github.com/goai-sdk/goai/server"
	"go.uber.org/goleak"
)

// wireStream is a well-formed agui-wire stream of one tool turn and one text
// turn of n tokens, with SSE ids 1.. when ids is set.
func wireStream(n int, ids bool) []event {
	evs := []event{
		{Type: "RUN_STARTED"},
		{Type: "TOOL_CALL_START", ToolCallID: "c"},
		{Type: "TOOL_CALL_ARGS", ToolCallID: "c"},
		{Type: "TOOL_CALL_END", ToolCallID: "c"},
		{Type: "CUSTOM"},
		{Type: "TOOL_CALL_RESULT", ToolCallID: "c"},
		{Type: "TEXT_MESSAGE_START", MessageID: "m"},
	}
	for j := 0; j < n; j++ {
		evs = append(evs, event{Type: "TEXT_MESSAGE_CONTENT", MessageID: "m", Delta: fmt.Sprintf("w%d ", j)})
	}
	evs = append(evs, event{Type: "TEXT_MESSAGE_END", MessageID: "m"}, event{Type: "RUN_FINISHED"})
	if ids {
		for i := range evs {
			evs[i].ID = fmt.Sprintf("vQwp567P:%d", i+1)
		}
	}
	return evs
}

func check(tokens int, oneTerminal bool, evs []event, transportErr error) (tally, []string) {
	c := newChecker(tokens, oneTerminal)
	for i := range evs {
		c.add(&evs[i])
	}
	return c.end(transportErr), c.problems
}

func TestAccounting(t *testing.T) {
	const n = 10
	content := func(i int) int { return 7 + i } // index of token i in wireStream
	tests := []struct {
		name   string
		mutate func([]event) []event
		ids    bool
		err    error
		want   tally
	}{
		{name: "whole", mutate: func(e []event) []event { return e },
			want: tally{Tokens: n}},
		{name: "whole with ids", ids: true, mutate: func(e []event) []event { return e },
			want: tally{Tokens: n}},
		{name: "token lost", mutate: func(e []event) []event { return append(e[:content(4):content(4)], e[content(5):]...) },
			want: tally{Tokens: n - 1, Lost: 1}},
		{name: "token duplicated", mutate: func(e []event) []event {
			return append(e[:content(4):content(4)], append([]event{e[content(3)]}, e[content(4):]...)...)
		}, want: tally{Tokens: n, Duplicated: 1}},
		{name: "tokens swapped", mutate: func(e []event) []event {
			e[content(2)], e[content(3)] = e[content(3)], e[content(2)]
			return e
		}, want: tally{Tokens: n, Reordered: 1}},
		{name: "cut after token 5", err: fmt.Errorf("connection reset"), mutate: func(e []event) []event { return e[:content(6)] },
			want: tally{Tokens: 6, Lost: n - 6 + 1 + 1}}, // tokens, TEXT_MESSAGE_END, RUN_FINISHED
		{name: "tool call without end", mutate: func(e []event) []event { return append(e[:3:3], e[4:]...) },
			want: tally{Tokens: n, Lost: 1}},
		{name: "content before start", mutate: func(e []event) []event {
			return append([]event{e[0], e[content(0)]}, e[1:]...)
		}, want: tally{Tokens: n, Protocol: 1}},
		{name: "event after the terminal", mutate: func(e []event) []event { return append(e, event{Type: "CUSTOM"}) },
			want: tally{Tokens: n, Protocol: 1, Lost: 1}},
		{name: "run error", mutate: func(e []event) []event {
			return append(e[:content(3):content(3)], event{Type: "RUN_ERROR"})
		}, want: tally{Tokens: 3, Lost: n - 3 + 1 + 1, RunErrors: 1}},
		{name: "no text at all", mutate: func(e []event) []event { return []event{e[0], e[len(e)-1]} },
			want: tally{Lost: n}},
		{name: "id gap", ids: true, mutate: func(e []event) []event { return append(e[:5:5], e[6:]...) },
			want: tally{Tokens: n, Lost: 1}},
		{name: "id repeated", ids: true, mutate: func(e []event) []event {
			e[5].ID = e[4].ID
			return e
		}, want: tally{Tokens: n, Duplicated: 1, Lost: 1}},
		{name: "ids backwards", ids: true, mutate: func(e []event) []event {
			e[4].ID, e[5].ID = e[5].ID, e[4].ID
			return e
		}, want: tally{Tokens: n, Reordered: 1, Lost: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := tt.mutate(wireStream(n, tt.ids))
			got, problems := check(n, true, evs, tt.err)
			want := tt.want
			want.Streams = 1
			want.Events = len(evs)
			if want.Lost+want.Duplicated+want.Reordered+want.Protocol+want.RunErrors > 0 || tt.err != nil {
				want.Failed = 1
			}
			if got != want {
				t.Errorf("tally\n got %+v\nwant %+v\nproblems %q", got, want, problems)
			}
			if (want.Failed == 1) != (len(problems) > 0) {
				t.Errorf("problems %q for failed=%d", problems, want.Failed)
			}
		})
	}
}

// The tanstack wire ends each model turn with RUN_FINISHED.
func TestAccountingTanStackWire(t *testing.T) {
	evs := wireStream(3, false)
	evs[4] = event{Type: "RUN_FINISHED"} // the tool turn's
	evs = append(evs[:5:5], append([]event{{Type: "RUN_STARTED"}}, evs[5:]...)...)
	if got, p := check(3, false, evs, nil); got.Failed != 0 || got.Tokens != 3 {
		t.Errorf("tanstack wire: %+v %q", got, p)
	}
	if got, _ := check(3, true, evs, nil); got.Protocol == 0 {
		t.Errorf("agui wire accepted a RUN_FINISHED mid-run: %+v", got)
	}
}

func TestReadSSE(t *testing.T) {
	in := "id: sqlite:v1:r:1\ndata: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\"}\n\n" +
		": comment\n" +
		"data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"w0 \",\"timestamp\":1700000000123}\n\n" +
		"data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"a\\\"b\",\"timestamp\":5}\n\n" +
		"data: {\"type\":\"TOOL_CALL_ARGS\",\"toolCallId\":\"c\",\"delta\":\"{}\"}\n\n" +
		"data: {\"type\":\"STATE_DELTA\",\"delta\":[{\"op\":\"add\"}]}\n\n"
	var got []event
	if err := readSSE(strings.NewReader(in), &decoder{tokens: tokenStrings(1)}, func(e *event, _ time.Time) { got = append(got, *e) }); err != nil {
		t.Fatal(err)
	}
	want := []event{
		{ID: "sqlite:v1:r:1", Type: "RUN_STARTED"},
		{Type: "TEXT_MESSAGE_CONTENT", MessageID: "m", Delta: "w0 ", Timestamp: 1700000000123},
		{Type: "TEXT_MESSAGE_CONTENT", MessageID: "m", Delta: `a"b`, Timestamp: 5},
		{Type: "TOOL_CALL_ARGS", ToolCallID: "c", Delta: "{}"},
		{Type: "STATE_DELTA"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if err := readSSE(strings.NewReader("data: {\"type\":\"RUN_STARTED\"}"), &decoder{}, func(*event, time.Time) {}); err == nil {
		t.Error("a stream cut mid-line was accepted")
	}
	if err := readSSE(strings.NewReader("data: {\"type\":\n"), &decoder{}, func(*event, time.Time) {}); err == nil {
		t.Error("a broken event was accepted")
	}
}

// FuzzDecodeEvent: the hand decoder of hot deltas agrees with encoding/json.
func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"w1 ","timestamp":12}`))
	f.Add([]byte(`{"type":"TEXT_MESSAGE_CONTENT","delta":"x","messageId":"m"}`))
	f.Add([]byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"w1 ","timestamp":1e3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast event
		d := decoder{tokens: tokenStrings(3)}
		if !d.fastDelta(data, &fast) {
			return
		}
		var slow event
		var slowDecoder decoder
		if err := slowDecoder.decode(append([]byte(" "), data...), &slow); err != nil {
			return // not JSON at all: the fast path is not asked to judge that
		}
		if fast != slow {
			t.Errorf("%s: fast %+v, json %+v", data, fast, slow)
		}
	})
}

// TestLoadAgainstServer drives the real handler (plain and durable on
// SQLite) with the paced scenario, tool calls included, and expects every
// stream whole.
func TestLoadAgainstServer(t *testing.T) {
	defer goleak.VerifyNone(t)
	data, err := scenario(scenarioSpec{Tokens: 20, DelayMs: 1, ToolEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scripted.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Cycle || !sc.StampYield {
		t.Fatalf("scenario lost cycle/stampYield: %+v", sc)
	}
	for _, mode := range []string{"plain", "sqlite"} {
		t.Run(mode, func(t *testing.T) {
			var store durable.Store
			if mode == "sqlite" {
				st, err := sqlite.Open(filepath.Join(t.TempDir(), "runs.db"), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = st.Shutdown() }()
				store = st
			}
			adapter := scripted.New(sc)
			cat := &scripted.Catalogue{}
			h := server.ChatHandler(server.Config{Store: store, Options: func(*server.Request) (chat.Options, error) {
				opts, err := cat.Options(sc, adapter)
				opts.Messages = nil
				return opts, err
			}})
			srv := httptest.NewServer(h)
			defer srv.Close()
			const clients, runs = 8, 3
			cfg := config{urls: []string{srv.URL + "/api/chat"}, join: store != nil, clients: clients, runs: runs, tokens: 20, oneTerminal: true, timeout: time.Minute, warmup: 2}
			rep, err := run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Tally.Failed != 0 || rep.Tally.Streams != clients*runs || rep.Tally.Tokens != clients*runs*20 {
				t.Fatalf("tally %+v, problems %q", rep.Tally, rep.Problems)
			}
			if rep.Stamped != clients*runs*20 || rep.TokLatMaxms <= 0 && rep.TokLatP50ms < 0 {
				t.Errorf("stamped tokens %d, latency p50 %v max %v", rep.Stamped, rep.TokLatP50ms, rep.TokLatMaxms)
			}
			if cfg.join {
				// Each run read a second time, from the start, while produced.
				if j := rep.Join; j == nil || j.Tally.Failed != 0 || j.Tally.Streams != clients*runs || j.Tally.Tokens != clients*runs*20 {
					t.Fatalf("join %+v, problems %q", rep.Join, rep.Problems)
				}
			}
			if calls := len(adapter.Calls()); calls <= clients*runs {
				t.Errorf("%d model calls for %d runs: no tool turn was served", calls, clients*runs)
			}
			srv.CloseClientConnections()
		})
	}
}

// TestLoadForADuration: with -duration, clients start runs until it has
// passed, each ending the run it is in, and the report counts them.
func TestLoadForADuration(t *testing.T) {
	defer goleak.VerifyNone(t)
	data, err := scenario(scenarioSpec{Tokens: 5, DelayMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scripted.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	adapter := scripted.New(sc)
	cat := &scripted.Catalogue{}
	h := server.ChatHandler(server.Config{RequestsPerSecond: -1, Options: func(*server.Request) (chat.Options, error) {
		opts, err := cat.Options(sc, adapter)
		opts.Messages = nil
		return opts, err
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer srv.CloseClientConnections()
	// A run takes five paced tokens (5 ms or more): in 100 ms a client
	// makes several, and -runs (1) does not bound them.
	const clients, d = 3, 100 * time.Millisecond
	cfg := config{urls: []string{srv.URL + "/api/chat"}, clients: clients, runs: 1, duration: d, tokens: 5, oneTerminal: true, timeout: time.Minute}
	rep, err := run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Tally.Failed != 0 || rep.Tally.Streams <= clients || rep.Tally.Tokens != rep.Tally.Streams*5 {
		t.Fatalf("tally %+v, problems %q", rep.Tally, rep.Problems)
	}
	if rep.WallS < d.Seconds() || rep.Runs < 2 || rep.Runs*clients < rep.Tally.Streams {
		t.Fatalf("wall %.3f s, at most %d runs a client, %d streams", rep.WallS, rep.Runs, rep.Tally.Streams)
	}
}

func TestMetricCount(t *testing.T) {
	body := "# HELP goai_store_commits_total x\n# TYPE goai_store_commits_total counter\ngoai_store_commits_total 1200\n" +
		"goai_store_commits_total_other 7\ngoai_store_writes_total 9600\n"
	if got := metricCount(body, "goai_store_commits_total"); got != 1200 {
		t.Errorf("commits = %d, want 1200", got)
	}
	if got := metricCount(body, "goai_store_writes_total"); got != 9600 {
		t.Errorf("writes = %d, want 9600", got)
	}
	if got := metricCount(body, "goai_missing_total"); got != 0 {
		t.Errorf("a missing series = %d, want 0", got)
	}
}
