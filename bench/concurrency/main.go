// Command concurrency opens M simultaneous chat streams (default 1,000)
// against `goai serve` on loopback and reports the server's peak memory, the
// p99 time to first byte, and whether every stream carried exactly its
// expected events in order.
//
// The server runs a generated scenario of M turns (a scripted server serves
// one turn per request, in arrival order); turn i streams RUN_STARTED,
// TEXT_MESSAGE_START (messageId m<i>), K deltas "s<i>.<j> ", TEXT_MESSAGE_END
// and RUN_FINISHED, pausing after the first delta so that all M streams are
// open at once. Every stream must be one whole turn, deltas in order, and
// every turn must arrive exactly once: nothing lost, duplicated or
// reordered.
//
// Usage: go run ./bench/concurrency -goai PATH [-streams 1000] [-deltas 20] [-hold 2s] [-store sqlite|none]
// (bench/concurrency.sh builds goai and runs it).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	goai := flag.String("goai", "", "path of the goai binary (required)")
	streams := flag.Int("streams", 1000, "simultaneous streams")
	deltas := flag.Int("deltas", 20, "text deltas per stream")
	hold := flag.Duration("hold", 2*time.Second, "pause after each stream's first delta, so all streams are open at once")
	wire := flag.String("wire", "agui", "wire profile of the server")
	timeout := flag.Duration("timeout", 120*time.Second, "give up after this long")
	store := flag.String("store", "sqlite", `run store of the server: "sqlite" (the default of goai serve, in a temporary directory), "none", or a --store value`)
	flag.Parse()
	if *goai == "" || *streams < 1 || *deltas < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*goai, *streams, *deltas, *hold, *wire, *store, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "concurrency:", err)
		os.Exit(1)
	}
}

type chunk map[string]any

func scenario(m, k int, hold time.Duration) []byte {
	turns := make([][]chunk, m)
	for i := range turns {
		id := fmt.Sprintf("m%d", i)
		t := []chunk{
			{"type": "RUN_STARTED", "runId": "run-bench", "threadId": "thread-bench", "model": "scripted-1"},
			{"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant", "model": "scripted-1"},
		}
		for j := 0; j < k; j++ {
			t = append(t, chunk{"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": fmt.Sprintf("s%d.%d ", i, j), "model": "scripted-1"})
			if j == 0 && hold > 0 {
				t = append(t, chunk{"delayMs": hold.Milliseconds()})
			}
		}
		t = append(t,
			chunk{"type": "TEXT_MESSAGE_END", "messageId": id, "model": "scripted-1"},
			chunk{"type": "RUN_FINISHED", "runId": "run-bench", "threadId": "thread-bench", "model": "scripted-1", "finishReason": "stop",
				"usage": chunk{"promptTokens": 1, "completionTokens": k, "totalTokens": k + 1}})
		turns[i] = t
	}
	b, _ := json.Marshal(chunk{
		"name": fmt.Sprintf("bench-%d-streams", m), "threadId": "thread-bench", "runId": "run-bench",
		"messages": []chunk{{"role": "user", "content": "hi"}}, "tools": []string{}, "middleware": []string{},
		"turns": turns,
	})
	return b
}

var servingLine = regexp.MustCompile(`goai serving on (http://\S+)`)

// procStatus reads a kB field (VmRSS, VmHWM) of /proc/PID/status.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	return -1
}

type result struct {
	ttfb, firstEvent, total time.Duration
	turn                    int
	err                     error
}

func run(goai string, m, k int, hold time.Duration, wire, store string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "goai-concurrency-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "scenario.json")
	if err := os.WriteFile(file, scenario(m, k, hold), 0o644); err != nil {
		return err
	}

	if store == "sqlite" {
		store = "sqlite:" + filepath.Join(dir, "goai.db")
	}
	// A load test: no agent sandbox, no run cap, no per-user rate.
	srv := exec.CommandContext(ctx, goai, "serve", "--no-tools", "--addr", "127.0.0.1:0", "--wire", wire, "--store", store, "--model", "scripted:"+file)
	srv.Env = append(os.Environ(), "GOAI_MAX_RUNS=0", "GOAI_RATE=0")
	var srvErr bytes.Buffer
	srv.Stderr = &srvErr
	out, err := srv.StdoutPipe()
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if mm := servingLine.FindStringSubmatch(sc.Text()); mm != nil {
				urlc <- mm[1] + "/api/chat"
			}
		}
	}()
	var url string
	select {
	case url = <-urlc:
	case <-time.After(15 * time.Second):
		return fmt.Errorf("goai serve did not start: %s", srvErr.String())
	}
	pid := srv.Process.Pid
	baseRSS := procStatus(pid, "VmRSS")

	tr := &http.Transport{MaxIdleConnsPerHost: m, DisableCompression: true, DisableKeepAlives: true}
	client := &http.Client{Transport: tr}
	var open, maxOpen atomic.Int64
	results := make([]result, m)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for s := 0; s < m; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			<-start
			results[s] = stream(ctx, client, url, s, k, &open, &maxOpen)
		}(s)
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	wall := time.Since(t0)
	peak := procStatus(pid, "VmHWM")

	// Verify: each stream one whole turn, each turn exactly once.
	seen := make(map[int]int, m)
	var failures []string
	var ttfb, first []time.Duration
	for s, r := range results {
		if r.err != nil {
			failures = append(failures, fmt.Sprintf("stream %d: %v", s, r.err))
			continue
		}
		seen[r.turn]++
		ttfb = append(ttfb, r.ttfb)
		first = append(first, r.firstEvent)
	}
	var lost, dup []int
	for i := 0; i < m; i++ {
		switch seen[i] {
		case 0:
			lost = append(lost, i)
		case 1:
		default:
			dup = append(dup, i)
		}
	}
	slices.Sort(ttfb)
	slices.Sort(first)
	fmt.Printf("streams %d simultaneous (max open at once %d), %d deltas each, hold %v, wire %s, store %s, wall %.2f s\n",
		m, maxOpen.Load(), k, hold, wire, store, wall.Seconds())
	fmt.Printf("server RSS before load %.1f MiB, peak %.1f MiB (VmHWM)\n", float64(baseRSS)/1024, float64(peak)/1024)
	if len(ttfb) > 0 {
		fmt.Printf("time to first byte: p50 %.1f ms, p99 %.1f ms, max %.1f ms; first event: p50 %.1f ms, p99 %.1f ms\n",
			ms(pct(ttfb, 50)), ms(pct(ttfb, 99)), ms(ttfb[len(ttfb)-1]), ms(pct(first, 50)), ms(pct(first, 99)))
	}
	fmt.Printf("verified: %d streams ok, %d failed, %d turns lost, %d duplicated\n", m-len(failures), len(failures), len(lost), len(dup))
	for i, f := range failures {
		if i == 10 {
			fmt.Printf("... %d more\n", len(failures)-10)
			break
		}
		fmt.Println(f)
	}
	if len(failures) > 0 || len(lost) > 0 || len(dup) > 0 {
		return errors.New("lost, duplicated or reordered events")
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return sorted[i-1]
}

type event struct {
	Type      string `json:"type"`
	MessageID string `json:"messageId"`
	Delta     string `json:"delta"`
}

// stream runs one request and checks its events against the turn it got.
func stream(ctx context.Context, client *http.Client, url string, s, k int, open, maxOpen *atomic.Int64) result {
	var r result
	body := fmt.Sprintf(`{"threadId":"thread-bench","runId":"run-%d","state":{},"messages":[{"id":"u%d","role":"user","content":"hi"}],"tools":[],"context":[],"forwardedProps":{}}`, s, s)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		r.err = err
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	t0 := time.Now()
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotFirstResponseByte: func() { r.ttfb = time.Since(t0) },
	}))
	resp, err := client.Do(req)
	if err != nil {
		r.err = err
		return r
	}
	defer resp.Body.Close()
	if n := open.Add(1); n > maxOpen.Load() {
		for {
			cur := maxOpen.Load()
			if n <= cur || maxOpen.CompareAndSwap(cur, n) {
				break
			}
		}
	}
	defer open.Add(-1)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		r.err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
		return r
	}
	var evs []event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			r.err = fmt.Errorf("event %d: %v", len(evs), err)
			return r
		}
		if len(evs) == 0 {
			r.firstEvent = time.Since(t0)
		}
		evs = append(evs, ev)
	}
	if err := sc.Err(); err != nil {
		r.err = err
		return r
	}
	r.total = time.Since(t0)
	r.turn, r.err = check(evs, k)
	return r
}

func check(evs []event, k int) (int, error) {
	types := make([]string, len(evs))
	for i, e := range evs {
		types[i] = e.Type
	}
	want := []string{"RUN_STARTED", "TEXT_MESSAGE_START"}
	for j := 0; j < k; j++ {
		want = append(want, "TEXT_MESSAGE_CONTENT")
	}
	want = append(want, "TEXT_MESSAGE_END", "RUN_FINISHED")
	if !slices.Equal(types, want) {
		return -1, fmt.Errorf("event sequence %v", types)
	}
	id := evs[1].MessageID
	turn, err := strconv.Atoi(strings.TrimPrefix(id, "m"))
	if err != nil || !strings.HasPrefix(id, "m") {
		return -1, fmt.Errorf("messageId %q", id)
	}
	for j := 0; j < k; j++ {
		e := evs[2+j]
		if e.MessageID != id || e.Delta != fmt.Sprintf("s%d.%d ", turn, j) {
			return -1, fmt.Errorf("delta %d of turn %d: messageId %q delta %q", j, turn, e.MessageID, e.Delta)
		}
	}
	if evs[2+k].MessageID != id {
		return -1, fmt.Errorf("TEXT_MESSAGE_END messageId %q, want %q", evs[2+k].MessageID, id)
	}
	return turn, nil
}
