// Command load drives an AG-UI endpoint with N concurrent SSE clients and
// reports what a user of the server would feel: events/s, time to first
// byte and to first token, per-token delivery latency from the model's yield
// to the client's read, errors, lost/duplicated/reordered events, and the
// server's peak memory and CPU time.
//
// Every client starts a run (POST, AG-UI RunAgentInput, X-Run-Id), reads its
// SSE stream to the end and checks it, -runs times back to back. The server
// runs the paced scripted model this command writes with -write-scenario
// (goai serve --model scripted:FILE, or bench/reference/server.mjs FILE):
// -tokens numbered deltas per answer, -delay-ms before each, a tool call
// every -tool-every model turns, every chunk stamped with its yield time.
// Traffic goes to loopback only; the run stops by itself (-timeout).
//
//	load -write-scenario FILE [-tokens 200] [-delay-ms 10] [-tool-every 3] [-hold-ms 0]
//	load -url http://127.0.0.1:PORT/api/chat [-clients 100] [-runs 1] [-pid PID,...] [-wire agui|tanstack] [-json]
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
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	exitCode := 0
	defer func() { os.Exit(exitCode) }() // after the profile's stop, deferred below
	var (
		writeScenario = flag.String("write-scenario", "", "write the paced scenario to FILE and exit")
		tokens        = flag.Int("tokens", 200, "text deltas per answer")
		delayMs       = flag.Int("delay-ms", 10, "model pause before each delta (ms)")
		toolEvery     = flag.Int("tool-every", 3, "a tool-call turn every N model turns (0: never)")
		holdMs        = flag.Int("hold-ms", 0, "model pause after each answer's first delta (ms), to hold streams open and idle")
		target        = flag.String("url", "", "AG-UI endpoint (loopback only); several, comma separated, are used in turn (client i starts its runs on URL i mod n)")
		join          = flag.Bool("join", false, "also join every run from the start on the next URL (GET ?runId=&offset=-1) and measure that delivery too (durable servers)")
		clients       = flag.Int("clients", 100, "concurrent clients (1 to 10,000 and more)")
		runs          = flag.Int("runs", 1, "runs per client, back to back")
		duration      = flag.Duration("duration", 0, "instead of -runs, each client starts runs back to back until this long has passed since the first (and ends the one it is in): two loads of the same duration side by side end together, whatever their servers' speeds")
		ramp          = flag.Duration("ramp", 0, "spread the clients' starts over this long")
		warmup        = flag.Int("warmup", 0, "runs made at once before measuring (not counted), so a JIT-compiled server is measured warm")
		pids          = flag.String("pid", "", "server process ids (comma separated) to sample for RSS and CPU")
		wire          = flag.String("wire", "agui", "the server's wire profile: agui (one RUN_FINISHED per run) or tanstack (one per model turn)")
		timeout       = flag.Duration("timeout", 5*time.Minute, "stop after this long")
		label         = flag.String("label", "", "label printed with the results")
		asJSON        = flag.Bool("json", false, "print the results as one JSON object")
		cpuProfile    = flag.String("cpuprofile", "", "write the load generator's own CPU profile to FILE")
		sortedIDs     = flag.Bool("sorted-ids", false, "run ids that sort in the order runs start (round, then client); by default they sort by client, so the runs going at one time are scattered among the ids, as clients' random ids are")
	)
	flag.Parse()
	spec := scenarioSpec{Tokens: *tokens, DelayMs: *delayMs, ToolEvery: *toolEvery, HoldMs: *holdMs}
	if *writeScenario != "" {
		b, err := scenario(spec)
		if err == nil {
			err = os.WriteFile(*writeScenario, b, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			os.Exit(1)
		}
		return
	}
	cfg := config{
		urls: strings.Split(*target, ","), join: *join, clients: *clients, runs: *runs, duration: *duration, ramp: *ramp, tokens: *tokens,
		oneTerminal: *wire == "agui", timeout: *timeout, warmup: *warmup, sortedIDs: *sortedIDs,
	}
	for _, p := range strings.Split(*pids, ",") {
		if p = strings.TrimSpace(p); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil {
				fmt.Fprintf(os.Stderr, "load: bad -pid %q\n", p)
				os.Exit(2)
			}
			cfg.pids = append(cfg.pids, n)
		}
	}
	if *wire != "agui" && *wire != "tanstack" {
		fmt.Fprintf(os.Stderr, "load: -wire must be agui or tanstack, got %q\n", *wire)
		os.Exit(2)
	}
	for _, u := range cfg.urls {
		if err := checkLoopback(u); err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			os.Exit(2)
		}
	}
	if cfg.clients < 1 || cfg.runs < 1 || cfg.duration < 0 {
		fmt.Fprintln(os.Stderr, "load: -clients and -runs must be at least 1, and -duration not negative")
		os.Exit(2)
	}
	raiseFDLimit(uint64(cfg.clients)*4 + 256)
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			os.Exit(1)
		}
		defer stop()
	}
	rep, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		exitCode = 1
		return
	}
	rep.Label = *label
	if *asJSON {
		b, _ := json.Marshal(rep)
		fmt.Println(string(b))
	} else {
		rep.print(os.Stdout)
	}
	if rep.Tally.Failed > 0 || rep.Join != nil && rep.Join.Tally.Failed > 0 {
		exitCode = 1
	}
}

// startCPUProfile profiles this process into file until stop is called.
func startCPUProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
		}
	}, nil
}

// checkLoopback refuses any target but a loopback address.
func checkLoopback(target string) error {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return fmt.Errorf("-url %q is not a URL", target)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-url %q: only loopback targets are allowed", target)
	}
	return nil
}

func raiseFDLimit(want uint64) {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil || l.Cur >= want {
		return
	}
	l.Cur = min(want, l.Max)
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

type config struct {
	urls        []string
	join        bool
	clients     int
	runs        int
	duration    time.Duration // > 0: runs are started until then, instead of runs each
	ramp        time.Duration
	tokens      int
	oneTerminal bool
	timeout     time.Duration
	warmup      int
	pids        []int
	// runPrefix makes run ids unique per invocation: a durable server
	// answers a known X-Run-Id by replaying that run's log.
	runPrefix string
	sortedIDs bool // runID sorts by round, then client
	// tokenStrings are the tokens' deltas, shared by every stream's decoder.
	tokenStrings []string
}

// more reports whether a client that has made r runs of a load started
// at t0 starts another.
func (cfg *config) more(r int, t0 time.Time) bool {
	if cfg.duration > 0 {
		return r == 0 || time.Since(t0) < cfg.duration
	}
	return r < cfg.runs
}

// runID names client c's run r. Sorted, the ids of the runs going at one
// time are neighbours (round r of every client), as the keys of a store
// that numbers runs as they start are; by default they are as far apart as
// the clients (client c's every round), which is what random ids do to a
// store keyed by them (bench/README.md, fifteenth pass).
func (cfg *config) runID(c, r int) string {
	if cfg.sortedIDs {
		return fmt.Sprintf("load-%s-%06d-%06d", cfg.runPrefix, r, c)
	}
	return fmt.Sprintf("load-%s-%d-%d", cfg.runPrefix, c, r)
}

// Report is the outcome of one load run.
type Report struct {
	Label       string  `json:"label,omitempty"`
	Clients     int     `json:"clients"`
	Runs        int     `json:"runs"`
	WallS       float64 `json:"wall_s"`
	EventsPerS  float64 `json:"events_per_s"`
	TokensPerS  float64 `json:"tokens_per_s"`
	TTFBp50ms   float64 `json:"ttfb_p50_ms"`
	TTFBp99ms   float64 `json:"ttfb_p99_ms"`
	TTFTp50ms   float64 `json:"ttft_p50_ms"`
	TTFTp99ms   float64 `json:"ttft_p99_ms"`
	TokLatP50ms float64 `json:"token_latency_p50_ms"`
	TokLatP99ms float64 `json:"token_latency_p99_ms"`
	TokLatMaxms float64 `json:"token_latency_max_ms"`
	Stamped     int     `json:"stamped_tokens"` // tokens that carried a yield timestamp
	// The model's achieved pace: per stream, the mean time between its
	// first and last stamped token's yields; p50 and p99 over streams. A
	// server too busy to run its model on time stretches it past the
	// scenario's delay, and that lateness is not in the token latency,
	// which starts at the yield.
	YieldGapP50ms float64 `json:"yield_interval_p50_ms"`
	YieldGapP99ms float64 `json:"yield_interval_p99_ms"`
	MaxOpen       int64   `json:"max_open_streams"`
	ServerBaseKB  int64   `json:"server_rss_base_kib"`
	ServerOpenKB  int64   `json:"server_rss_all_open_kib"` // RSS when the most streams were open at once
	ServerPeakKB  int64   `json:"server_rss_peak_kib"`
	ServerCPUs    float64 `json:"server_cpu_s"`
	LoadCPUs      float64 `json:"loadgen_cpu_s"`
	LoadAvg       string  `json:"loadavg"`
	// The store's group commits during the measured runs, from the
	// servers' /metrics (goai serve with SQLite or Postgres; absent
	// otherwise): writes over commits is how many writes shared one.
	StoreCommits int64    `json:"store_commits,omitempty"`
	StoreWrites  int64    `json:"store_writes,omitempty"`
	Tally        tally    `json:"tally"`
	Problems     []string `json:"problems,omitempty"`
	// Joined runs: each run read a second time from the start on the next
	// URL while it is produced (-join).
	Join *JoinReport `json:"join,omitempty"`
}

// JoinReport is what the joining readers saw.
type JoinReport struct {
	TTFTp50ms   float64 `json:"ttft_p50_ms"` // from the join request to its first token
	TTFTp99ms   float64 `json:"ttft_p99_ms"`
	TokLatP50ms float64 `json:"token_latency_p50_ms"`
	TokLatP99ms float64 `json:"token_latency_p99_ms"`
	TokLatMaxms float64 `json:"token_latency_max_ms"`
	Tally       tally   `json:"tally"`
}

func (r *Report) print(w io.Writer) {
	t := r.Tally
	if r.Label != "" {
		fmt.Fprintf(w, "== %s\n", r.Label)
	}
	fmt.Fprintf(w, "clients %d x runs %d: wall %.2f s, %.0f events/s, %.0f tokens/s, max open streams %d\n",
		r.Clients, r.Runs, r.WallS, r.EventsPerS, r.TokensPerS, r.MaxOpen)
	fmt.Fprintf(w, "TTFB p50 %.1f ms p99 %.1f ms; first token p50 %.1f ms p99 %.1f ms\n", r.TTFBp50ms, r.TTFBp99ms, r.TTFTp50ms, r.TTFTp99ms)
	fmt.Fprintf(w, "token delivery latency (model yield -> client read, 1 ms resolution, %d tokens): p50 %.2f ms p99 %.2f ms max %.2f ms\n",
		r.Stamped, r.TokLatP50ms, r.TokLatP99ms, r.TokLatMaxms)
	fmt.Fprintf(w, "model pace achieved (mean time between a stream's token yields): p50 %.2f ms p99 %.2f ms\n", r.YieldGapP50ms, r.YieldGapP99ms)
	if r.ServerPeakKB > 0 {
		fmt.Fprintf(w, "server: RSS base %.1f MiB, with all streams open %.1f MiB, peak %.1f MiB; CPU %.2f s\n",
			kib(r.ServerBaseKB), kib(r.ServerOpenKB), kib(r.ServerPeakKB), r.ServerCPUs)
	}
	fmt.Fprintf(w, "load generator CPU %.2f s; load average %s\n", r.LoadCPUs, r.LoadAvg)
	fmt.Fprintf(w, "streams %d, failed %d; events %d, tokens %d; lost %d, duplicated %d, reordered %d, out of place %d, RUN_ERROR %d\n",
		t.Streams, t.Failed, t.Events, t.Tokens, t.Lost, t.Duplicated, t.Reordered, t.Protocol, t.RunErrors)
	if j := r.Join; j != nil {
		fmt.Fprintf(w, "joined on the next replica: first token p50 %.1f ms p99 %.1f ms; token latency p50 %.2f p99 %.2f max %.2f ms; streams %d failed %d lost %d dup %d reordered %d\n",
			j.TTFTp50ms, j.TTFTp99ms, j.TokLatP50ms, j.TokLatP99ms, j.TokLatMaxms, j.Tally.Streams, j.Tally.Failed, j.Tally.Lost, j.Tally.Duplicated, j.Tally.Reordered)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, "  ", p)
	}
}

func kib(k int64) float64 { return float64(k) / 1024 }

// result is one stream's outcome.
type result struct {
	ttfb, ttft time.Duration
	gotTTFT    bool
	// yields of the first and last stamped tokens (ms), and their number
	firstYield, lastYield int64
	yields                int
	tally                 tally
	problems              []string
	join                  *result // the joining reader's, with -join
}

func run(cfg config) (*Report, error) {
	if cfg.runPrefix == "" {
		cfg.runPrefix = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	cfg.tokenStrings = tokenStrings(cfg.tokens)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()

	tr := &http.Transport{
		MaxIdleConns: cfg.clients, MaxIdleConnsPerHost: cfg.clients, MaxConnsPerHost: 0,
		DisableCompression: true, IdleConnTimeout: 30 * time.Second,
		// A large read buffer takes a backlog of chunks in one read system
		// call rather than one or two per chunk; up to 256 MiB in all.
		ReadBufferSize: min(64<<10, max(4<<10, (256<<20)/cfg.clients)),
		DialContext:    (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	if err := warmUp(ctx, client, cfg); err != nil {
		return nil, err
	}
	base := sampleServer(cfg.pids)
	baseCommits := scrapeCommits(ctx, client, cfg.urls)
	var open, maxOpen atomic.Int64
	var openRSS atomic.Int64
	stopSampling := make(chan struct{})
	var peak atomic.Int64
	var samplerDone sync.WaitGroup
	samplerDone.Add(1)
	go func() {
		defer samplerDone.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		bestOpen := int64(0)
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			s := sampleServer(cfg.pids)
			if s.rss > peak.Load() {
				peak.Store(s.rss)
			}
			if o := open.Load(); o >= bestOpen && o > 0 {
				bestOpen = o
				openRSS.Store(s.rss)
			}
		}
	}()

	type clientOut struct {
		results []result
		lat     []int32 // µs
		joinLat []int32
	}
	outs := make([]clientOut, cfg.clients)
	var wg sync.WaitGroup
	t0 := time.Now()
	for c := 0; c < cfg.clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			if cfg.ramp > 0 {
				d := time.Duration(int64(cfg.ramp) * int64(c) / int64(cfg.clients))
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
			o := &outs[c]
			for r := 0; cfg.more(r, t0); r++ {
				url := cfg.urls[c%len(cfg.urls)]
				joinURL := ""
				if cfg.join {
					joinURL = cfg.urls[(c+1)%len(cfg.urls)]
				}
				res := stream(ctx, client, cfg, url, joinURL, cfg.runID(c, r), &open, &maxOpen, &o.lat, &o.joinLat)
				o.results = append(o.results, res)
			}
		}(c)
	}
	wg.Wait()
	wall := time.Since(t0)
	close(stopSampling)
	samplerDone.Wait()
	end := sampleServer(cfg.pids)
	endCommits := scrapeCommits(ctx, client, cfg.urls)

	rep := &Report{Clients: cfg.clients, Runs: cfg.runs, WallS: wall.Seconds(), MaxOpen: maxOpen.Load()}
	if cfg.duration > 0 {
		rep.Runs = 0 // the most runs a client made
		for _, o := range outs {
			rep.Runs = max(rep.Runs, len(o.results))
		}
	}
	var ttfb, ttft, joinTTFT []time.Duration
	var gaps []float64 // ms
	nLat, nJoinLat := 0, 0
	for _, o := range outs {
		nLat += len(o.lat)
		nJoinLat += len(o.joinLat)
	}
	lat, joinLat := make([]int32, 0, nLat), make([]int32, 0, nJoinLat)
	for _, o := range outs {
		lat = append(lat, o.lat...)
		joinLat = append(joinLat, o.joinLat...)
		for _, r := range o.results {
			rep.Tally.add(r.tally)
			if j := r.join; j != nil {
				if rep.Join == nil {
					rep.Join = &JoinReport{}
				}
				rep.Join.Tally.add(j.tally)
				if j.gotTTFT {
					joinTTFT = append(joinTTFT, j.ttft)
				}
				for _, p := range j.problems {
					if len(rep.Problems) < 10 {
						rep.Problems = append(rep.Problems, "join "+p)
					}
				}
			}
			if r.ttfb > 0 {
				ttfb = append(ttfb, r.ttfb)
			}
			if r.gotTTFT {
				ttft = append(ttft, r.ttft)
			}
			if r.yields >= 2 {
				gaps = append(gaps, float64(r.lastYield-r.firstYield)/float64(r.yields-1))
			}
			for _, p := range r.problems {
				if len(rep.Problems) < 10 {
					rep.Problems = append(rep.Problems, p)
				}
			}
		}
	}
	slices.Sort(ttfb)
	slices.Sort(ttft)
	slices.Sort(gaps)
	rep.YieldGapP50ms, rep.YieldGapP99ms = pct(gaps, 50), pct(gaps, 99)
	slices.Sort(lat)
	rep.EventsPerS = float64(rep.Tally.Events) / wall.Seconds()
	rep.TokensPerS = float64(rep.Tally.Tokens) / wall.Seconds()
	rep.TTFBp50ms, rep.TTFBp99ms = ms(pct(ttfb, 50)), ms(pct(ttfb, 99))
	rep.TTFTp50ms, rep.TTFTp99ms = ms(pct(ttft, 50)), ms(pct(ttft, 99))
	rep.Stamped = len(lat)
	if len(lat) > 0 {
		rep.TokLatP50ms = float64(pct(lat, 50)) / 1000
		rep.TokLatP99ms = float64(pct(lat, 99)) / 1000
		rep.TokLatMaxms = float64(lat[len(lat)-1]) / 1000
	}
	if j := rep.Join; j != nil {
		slices.Sort(joinTTFT)
		slices.Sort(joinLat)
		j.TTFTp50ms, j.TTFTp99ms = ms(pct(joinTTFT, 50)), ms(pct(joinTTFT, 99))
		if len(joinLat) > 0 {
			j.TokLatP50ms = float64(pct(joinLat, 50)) / 1000
			j.TokLatP99ms = float64(pct(joinLat, 99)) / 1000
			j.TokLatMaxms = float64(joinLat[len(joinLat)-1]) / 1000
		}
	}
	rep.ServerBaseKB = base.rss
	rep.ServerOpenKB = openRSS.Load()
	rep.ServerPeakKB = max(peak.Load(), end.rss)
	if len(cfg.pids) == 1 && end.hwm > 0 {
		rep.ServerPeakKB = end.hwm // the kernel's own high-water mark
	}
	rep.ServerCPUs = end.cpu - base.cpu
	rep.StoreCommits = endCommits.commits - baseCommits.commits
	rep.StoreWrites = endCommits.writes - baseCommits.writes
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		rep.LoadCPUs = tv(ru.Utime) + tv(ru.Stime)
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			rep.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	if ctx.Err() != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("stopped by -timeout %v", cfg.timeout))
	}
	return rep, nil
}

// warmUp makes cfg.warmup runs at once and checks them, uncounted.
func warmUp(ctx context.Context, client *http.Client, cfg config) error {
	errs := make(chan error, cfg.warmup)
	for i := range cfg.warmup {
		go func() {
			var o, m atomic.Int64
			var lat []int32
			w := stream(ctx, client, cfg, cfg.urls[i%len(cfg.urls)], "", fmt.Sprintf("warmup-%s-%d", cfg.runPrefix, i), &o, &m, &lat, nil)
			if w.tally.Failed > 0 {
				errs <- fmt.Errorf("warm-up run failed: %q", w.problems)
				return
			}
			errs <- nil
		}()
	}
	var first error
	for range cfg.warmup {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct is the p-th percentile (nearest rank) of a sorted slice.
func pct[T int32 | time.Duration | float64](sorted []T, p int) T {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return sorted[i-1]
}

// commitCount is the store's commit counters, summed over the servers.
type commitCount struct{ commits, writes int64 }

// scrapeCommits reads goai_store_commits_total and goai_store_writes_total
// from the /metrics of each server in urls (zero for one without them).
func scrapeCommits(ctx context.Context, client *http.Client, urls []string) commitCount {
	var c commitCount
	seen := map[string]bool{}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || seen[u.Host] {
			continue
		}
		seen[u.Host] = true
		m := url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/metrics"}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.String(), nil)
		if err != nil {
			continue
		}
		res, err := client.Do(req)
		if err != nil {
			continue
		}
		body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		res.Body.Close()
		if err != nil {
			continue
		}
		c.commits += metricCount(string(body), "goai_store_commits_total")
		c.writes += metricCount(string(body), "goai_store_writes_total")
	}
	return c
}

// metricCount returns the value of the series name in a Prometheus text
// body, 0 when it is absent.
func metricCount(body, name string) int64 {
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// serverSample is the summed memory and CPU of the server processes.
type serverSample struct {
	rss, hwm int64   // KiB
	cpu      float64 // seconds
}

func sampleServer(pids []int) serverSample {
	var s serverSample
	for _, pid := range pids {
		s.rss += procStatus(pid, "VmRSS")
		s.hwm += procStatus(pid, "VmHWM")
		s.cpu += procCPU(pid)
	}
	return s
}

// procStatus reads a kB field of /proc/PID/status (0 when unreadable).
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	return 0
}

// procCPU is the user+system CPU time of a process, in seconds.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesized command name; utime and stime are
	// fields 14 and 15 of the whole line, in clock ticks (USER_HZ = 100).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

// stream runs one request and accounts for its events. With joinURL set,
// a second reader joins the run there from its start once the first byte
// has arrived, and is accounted the same way.
func stream(ctx context.Context, client *http.Client, cfg config, url, joinURL, runID string, open, maxOpen *atomic.Int64, lat, joinLat *[]int32) (res result) {
	chk := newChecker(cfg.tokens, cfg.oneTerminal)
	finish := func(err error) result {
		res.tally = chk.end(err)
		for _, p := range chk.problems {
			res.problems = append(res.problems, runID+": "+p)
		}
		return res
	}
	body := `{"threadId":"thread-` + runID + `","runId":"` + runID + `","state":{},"messages":[{"id":"u-` + runID +
		`","role":"user","content":"hi"}],"tools":[],"context":[],"forwardedProps":{}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return finish(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Run-Id", runID)
	t0 := time.Now()
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotFirstResponseByte: func() { res.ttfb = time.Since(t0) },
	}))
	resp, err := client.Do(req)
	if err != nil {
		return finish(err)
	}
	defer resp.Body.Close()
	n := open.Add(1)
	for cur := maxOpen.Load(); n > cur && !maxOpen.CompareAndSwap(cur, n); cur = maxOpen.Load() {
	}
	defer open.Add(-1)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return finish(fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b)))
	}
	if joinURL != "" {
		done := make(chan result, 1)
		go func() { done <- joinRun(ctx, client, cfg, joinURL, runID, joinLat) }()
		defer func() {
			j := <-done
			res.join = &j
		}()
	}
	d := decoder{tokens: cfg.tokenStrings}
	err = readSSE(resp.Body, &d, func(e *event, at time.Time) { res.observe(e, at, t0, lat, chk) })
	return finish(err)
}

// observe takes one event of a stream opened at t0, read at now: the time
// to its first text, each text delta's delay since the server stamped it
// (into lat), and the checker's look at it.
func (res *result) observe(e *event, now, t0 time.Time, lat *[]int32, chk *checker) {
	if e.Type == "TEXT_MESSAGE_CONTENT" {
		if !res.gotTTFT {
			res.ttft, res.gotTTFT = now.Sub(t0), true
		}
		if e.Timestamp > 0 {
			d := now.UnixMicro() - e.Timestamp*1000
			*lat = append(*lat, int32(min(max(d, 0), math.MaxInt32)))
			if res.yields == 0 {
				res.firstYield = e.Timestamp
			}
			res.lastYield = e.Timestamp
			res.yields++
		}
	}
	chk.add(e)
}

// joinRun reads run runID from its start at url (GET ?runId=&offset=-1).
func joinRun(ctx context.Context, client *http.Client, cfg config, url, runID string, lat *[]int32) result {
	var res result
	chk := newChecker(cfg.tokens, cfg.oneTerminal)
	finish := func(err error) result {
		res.tally = chk.end(err)
		for _, p := range chk.problems {
			res.problems = append(res.problems, runID+": "+p)
		}
		return res
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"?runId="+runID+"&offset=-1", nil)
	if err != nil {
		return finish(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return finish(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return finish(fmt.Errorf("join: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b)))
	}
	var local []int32
	d := decoder{tokens: cfg.tokenStrings}
	err = readSSE(resp.Body, &d, func(e *event, at time.Time) { res.observe(e, at, t0, &local, chk) })
	*lat = append(*lat, local...)
	return finish(err)
}

// readSSE calls fn for each event of an SSE stream, with the time the read
// that completed the event returned (every event of one read arrived
// together, so one clock reading serves them all). The hot deltas are
// picked apart by hand: the load generator shares the machine with the
// server it measures, so it must cost little.
func readSSE(r io.Reader, d *decoder, fn func(e *event, at time.Time)) error {
	sr := &stampedReader{r: r}
	br := bufio.NewReaderSize(sr, 16<<10)
	var id string
	var e event
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: collect it whole.
			long := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			if err == io.EOF {
				if len(bytes.TrimSpace(line)) > 0 {
					return errors.New("stream ends mid-line")
				}
				return nil
			}
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0 || line[0] == ':':
		case bytes.HasPrefix(line, []byte("data:")):
			data := line[5:]
			if len(data) > 0 && data[0] == ' ' {
				data = data[1:]
			}
			if string(data) == "[DONE]" {
				continue
			}
			e = event{ID: id}
			id = ""
			if err := d.decode(data, &e); err != nil {
				return fmt.Errorf("event %.80q: %w", data, err)
			}
			fn(&e, sr.at)
		case bytes.HasPrefix(line, []byte("id:")):
			id = string(bytes.TrimSpace(line[3:]))
		}
	}
}

// stampedReader notes when each read returned.
type stampedReader struct {
	r  io.Reader
	at time.Time
}

func (s *stampedReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.at = time.Now()
	return n, err
}

// decoder decodes one stream's events, reusing the strings it made before:
// the hot deltas' message id and numbered tokens ("w<j> ") cost no
// allocation.
type decoder struct {
	tokens    []string // tokens[j] == "w<j> "; may be nil
	messageID string   // the last message id decoded
}

// tokenStrings is the table of a decoder for answers of n tokens.
func tokenStrings(n int) []string {
	t := make([]string, n)
	for j := range t {
		t[j] = "w" + strconv.Itoa(j) + " "
	}
	return t
}

// decode fills e from one event's JSON.
func (d *decoder) decode(data []byte, e *event) error {
	if d.fastDelta(data, e) {
		return nil
	}
	var v struct {
		Type       string `json:"type"`
		MessageID  string `json:"messageId"`
		Delta      any    `json:"delta"`
		ToolCallID string `json:"toolCallId"`
		Timestamp  int64  `json:"timestamp"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	e.Type, e.MessageID, e.ToolCallID, e.Timestamp = v.Type, v.MessageID, v.ToolCallID, v.Timestamp
	if s, ok := v.Delta.(string); ok {
		e.Delta = s
	}
	return nil
}

var (
	contentPrefix = []byte(`{"type":"TEXT_MESSAGE_CONTENT"`)
	messageIDKey  = []byte(`"messageId":"`)
	deltaKey      = []byte(`"delta":"`)
	timestampKey  = []byte(`"timestamp":`)
)

// fastDelta decodes a TEXT_MESSAGE_CONTENT whose string fields need no
// unescaping; false means "use the full decoder". Without a backslash no
// key can hide inside a string value, so the keys are found by search.
func (d *decoder) fastDelta(data []byte, e *event) bool {
	if !bytes.HasPrefix(data, contentPrefix) || bytes.IndexByte(data, '\\') >= 0 {
		return false
	}
	rest := data[len(contentPrefix):]
	str := func(key []byte) ([]byte, bool) {
		i := bytes.Index(rest, key)
		if i < 0 {
			return nil, false
		}
		v := rest[i+len(key):]
		j := bytes.IndexByte(v, '"')
		if j < 0 {
			return nil, false
		}
		return v[:j], true
	}
	id, ok := str(messageIDKey)
	if !ok {
		return false
	}
	delta, ok := str(deltaKey)
	if !ok {
		return false
	}
	if string(id) != d.messageID {
		d.messageID = string(id)
	}
	e.MessageID = d.messageID
	e.Delta = d.token(delta)
	e.Type = "TEXT_MESSAGE_CONTENT"
	if i := bytes.Index(rest, timestampKey); i >= 0 {
		ts, ok := parseDigits(rest[i+len(timestampKey):])
		if !ok {
			return false
		}
		e.Timestamp = ts
	}
	return true
}

// token is delta as a string, from the table when it is one of its tokens.
func (d *decoder) token(delta []byte) string {
	if len(delta) >= 3 && delta[0] == 'w' && delta[len(delta)-1] == ' ' {
		if j, ok := parseDigits(delta[1:]); ok && j < int64(len(d.tokens)) && string(delta) == d.tokens[j] {
			return d.tokens[j]
		}
	}
	return string(delta)
}

// parseDigits reads the decimal number at the start of b (at least one
// digit, at most 18).
func parseDigits(b []byte) (int64, bool) {
	var n int64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i == 18 {
			return 0, false
		}
		n = n*10 + int64(b[i]-'0')
	}
	return n, i > 0
}
