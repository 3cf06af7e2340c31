package server_test

// End-to-end tests that drive the real `goai serve` binary as a process:
// re-attaching after a cut connection, kill -9 mid-run and restart on the
// same SQLite file, and two replicas on one Postgres.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/server"
)

// buildGoai builds cmd/goai into a temporary directory.
func buildGoai(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the goai binary; skipped in -short mode")
	}
	bin := filepath.Join(t.TempDir(), "goai")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/goai-sdk/goai/cmd/goai")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/goai: %v\n%s", err, out)
	}
	return bin
}

// scenarioFile writes a scripted model turn of n deltas, delayMs apart.
func scenarioFile(t *testing.T, n, delayMs int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"name":"slow","turns":[[{"type":"RUN_STARTED","threadId":"t1","runId":"r1"},{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `,{"delayMs":%d},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"w%d "}`, delayMs, i)
	}
	b.WriteString(`,{"type":"TEXT_MESSAGE_END","messageId":"m1"},{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","finishReason":"stop"}]]}`)
	path := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func wantText(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "w%d ", i)
	}
	return b.String()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// goaiProc is one running `goai serve`.
type goaiProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	waited chan struct{}
}

// startServe starts `goai serve` on a free loopback port and waits until
// it listens. It is killed at cleanup if still running.
func startServe(t *testing.T, bin string, env []string, args ...string) *goaiProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	p := &goaiProc{cmd: cmd, stderr: &lockedBuffer{}, waited: make(chan struct{})}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.waited) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("goai serve %s stderr:\n%s", p.url, p.stderr.String())
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-line:
		i := strings.Index(l, "http://")
		if !ok || i < 0 {
			t.Fatalf("goai serve did not start: %q\n%s", l, p.stderr.String())
		}
		p.url = strings.Fields(l[i:])[0]
	case <-time.After(30 * time.Second):
		t.Fatalf("goai serve did not start within 30s\n%s", p.stderr.String())
	}
	return p
}

// kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (p *goaiProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.waited
}

func runBody(run string) string {
	return strings.NewReplacer(`"runId":"r1"`, `"runId":"`+run+`"`).Replace(body)
}

// open sends a durable request; hdr may carry Last-Event-ID.
func open(t *testing.T, ctx context.Context, method, u string, hdr map[string]string, b string) *http.Response {
	t.Helper()
	var rd io.Reader
	if b != "" {
		rd = strings.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(ctx, method, u, rd)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("%s %s: %d %s", method, u, res.StatusCode, b)
	}
	return res
}

// readFrames reads SSE frames until n were read (n < 0: to the end) or the
// stream breaks; it reports whether the stream ended cleanly.
func readFrames(br *bufio.Reader, n int) (fs []agui.Frame, clean bool) {
	for f, err := range agui.ReadSSE(br) {
		if err != nil {
			return fs, false
		}
		fs = append(fs, f)
		if len(fs) == n {
			return fs, false
		}
	}
	return fs, true
}

// frameStream reads one response's frames across several calls (ReadSSE
// buffers ahead, so one iterator must serve the whole response).
type frameStream struct {
	next func() (agui.Frame, error, bool)
	stop func()
}

func newFrameStream(r io.Reader) *frameStream {
	next, stop := iter.Pull2(agui.ReadSSE(r))
	return &frameStream{next: next, stop: stop}
}

// read reads n frames (n < 0: to the end); clean reports a clean end.
func (s *frameStream) read(n int) (fs []agui.Frame, clean bool) {
	for len(fs) != n {
		f, err, ok := s.next()
		if !ok {
			return fs, true
		}
		if err != nil {
			return fs, false
		}
		fs = append(fs, f)
	}
	return fs, false
}

// readAllWithin reads a stream to its end, failing if that takes longer
// than d (a reader must never be left waiting forever).
func readAllWithin(t *testing.T, res *http.Response, d time.Duration) []agui.Frame {
	t.Helper()
	type result struct {
		fs    []agui.Frame
		clean bool
	}
	done := make(chan result, 1)
	go func() {
		fs, clean := readFrames(bufio.NewReader(res.Body), -1)
		done <- result{fs, clean}
	}()
	select {
	case r := <-done:
		res.Body.Close()
		if !r.clean {
			t.Fatalf("stream broke after %d frames", len(r.fs))
		}
		return r.fs
	case <-time.After(d):
		res.Body.Close()
		t.Fatalf("stream did not end within %v", d)
	}
	return nil
}

// checkExactlyOnce checks that got is the full log, each offset once, in
// order.
func checkExactlyOnce(t *testing.T, what string, got, full []agui.Frame) {
	t.Helper()
	if len(got) != len(full) {
		t.Fatalf("%s: %d frames, the log holds %d", what, len(got), len(full))
	}
	for i := range full {
		if got[i].ID != full[i].ID || !bytes.Equal(got[i].Data, full[i].Data) {
			t.Fatalf("%s: frame %d is %s %s, the log has %s %s", what, i, got[i].ID, got[i].Data, full[i].ID, full[i].Data)
		}
	}
}

// checkRanOnce checks that a log holds one run: one acceptance marker, one
// RUN_STARTED, and each scripted delta once, in order.
func checkRanOnce(t *testing.T, full []agui.Frame, text string) {
	t.Helper()
	accepted, started := 0, 0
	var got strings.Builder
	for _, f := range full {
		switch {
		case f.Event.Type == agui.Custom && f.Event.Name == server.RunAcceptedEvent:
			accepted++
		case f.Event.Type == agui.RunStarted:
			started++
		case f.Event.Type == agui.TextMessageContent:
			got.WriteString(f.Event.Delta)
		}
	}
	if accepted != 1 || started != 1 || !strings.HasPrefix(text, got.String()) {
		t.Fatalf("the log is not one run of the model: %d run.accepted, %d RUN_STARTED, text %q", accepted, started, got.String())
	}
	if text != "" && got.String() != text && full[len(full)-1].Event.Type == agui.RunFinished {
		t.Fatalf("finished run text %q, want %q", got.String(), text)
	}
}

// activeRun hydrates threadId t1 and returns its active run id ("" for none).
func activeRun(t *testing.T, base string) string {
	t.Helper()
	res := open(t, context.Background(), http.MethodGet, base+"/api/chat?threadId=t1", nil, "")
	defer res.Body.Close()
	var h struct{ ActiveRun *struct{ RunID string } }
	if err := json.NewDecoder(res.Body).Decode(&h); err != nil {
		t.Fatalf("hydrate: %v", err)
	}
	if h.ActiveRun == nil {
		return ""
	}
	return h.ActiveRun.RunID
}

// eventuallyInactive waits for hydration to stop reporting an active run:
// the record turns terminal just after the log closes.
func eventuallyInactive(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := activeRun(t, base)
		if r == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("hydration still reports run %q active", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func joinAll(t *testing.T, base, run string) []agui.Frame {
	t.Helper()
	res := open(t, context.Background(), http.MethodGet, base+"/api/chat?runId="+url.QueryEscape(run)+"&offset=-1", nil, "")
	return readAllWithin(t, res, 30*time.Second)
}

// Cut the connection mid-run and re-attach with Last-Event-ID: no gap, no
// duplicate, and the model ran once.
func TestServeProcessReattachAfterCut(t *testing.T) {
	bin := buildGoai(t)
	dir := t.TempDir()
	p := startServe(t, bin, nil, "--model", "scripted:"+scenarioFile(t, 30, 40), "--store", "sqlite:"+filepath.Join(dir, "goai.db"))
	hdr := map[string]string{"X-Run-Id": "run-cut"}
	ctx, cut := context.WithCancel(context.Background())
	res := open(t, ctx, http.MethodPost, p.url+"/api/chat", hdr, runBody("run-cut"))
	first, _ := readFrames(bufio.NewReader(res.Body), 8)
	cut()
	res.Body.Close()
	if len(first) != 8 || first[7].ID == "" {
		t.Fatalf("first connection: %d frames, last id %q", len(first), first[len(first)-1].ID)
	}
	hdr["Last-Event-ID"] = first[7].ID
	res = open(t, context.Background(), http.MethodPost, p.url+"/api/chat", hdr, runBody("run-cut"))
	rest := readAllWithin(t, res, 30*time.Second)
	full := joinAll(t, p.url, "run-cut")
	checkExactlyOnce(t, "cut + re-attach", append(first, rest...), full)
	checkRanOnce(t, full, wantText(30))
	if last := full[len(full)-1].Event; last.Type != agui.RunFinished {
		t.Fatalf("log ends with %s %q", last.Type, last.Message)
	}
	if strings.Contains(p.stderr.String(), "script exhausted") {
		t.Fatal("the model was called twice")
	}
}

// kill -9 the server mid-run (during the first events, and later), restart
// it on the same SQLite file: no acknowledged event is lost, the run is
// reclaimed with RUN_ERROR producer-lost, and readers that re-attach get
// every event exactly once, in order, and end.
func TestServeProcessKill9Recovery(t *testing.T) {
	bin := buildGoai(t)
	scenario := scenarioFile(t, 400, 25)
	env := []string{"GOAI_LEASE=1s"}
	for _, killAfter := range []int{1, 12} {
		t.Run(fmt.Sprint("after_", killAfter, "_frames"), func(t *testing.T) {
			db := "sqlite:" + filepath.Join(t.TempDir(), "goai.db")
			run := fmt.Sprint("run-kill-", killAfter)
			p1 := startServe(t, bin, env, "--model", "scripted:"+scenario, "--store", db)
			hdr := map[string]string{"X-Run-Id": run}
			res := open(t, context.Background(), http.MethodPost, p1.url+"/api/chat", hdr, runBody(run))
			acked, _ := readFrames(bufio.NewReader(res.Body), killAfter)
			p1.kill()
			res.Body.Close()
			if len(acked) != killAfter {
				t.Fatalf("read %d frames before the kill, want %d", len(acked), killAfter)
			}

			start := time.Now()
			p2 := startServe(t, bin, env, "--model", "scripted:"+scenario, "--store", db)
			hdr["Last-Event-ID"] = acked[len(acked)-1].ID
			res = open(t, context.Background(), http.MethodPost, p2.url+"/api/chat", hdr, runBody(run))
			rest := readAllWithin(t, res, 20*time.Second)
			ended := time.Since(start)
			full := joinAll(t, p2.url, run)
			checkExactlyOnce(t, "acknowledged + re-attached after restart", append(acked, rest...), full)
			checkRanOnce(t, full, wantText(400))
			last := full[len(full)-1].Event
			if last.Type != agui.RunError || last.Code != server.ProducerLostCode {
				t.Fatalf("log ends with %s %q %q, want RUN_ERROR %s", last.Type, last.Code, last.Message, server.ProducerLostCode)
			}
			// The restarted server never re-ran the model.
			if strings.Contains(p2.stderr.String(), "script exhausted") || len(full) > 20+killAfter*2 {
				t.Fatalf("the restarted server produced the run again (%d frames)", len(full))
			}
			// Hydration no longer reports the run as active.
			eventuallyInactive(t, p2.url)
			t.Logf("killed after %d frames; the re-attached reader ended %v after the restart began (lease 1s)", killAfter, ended.Round(time.Millisecond))
		})
	}
}

// newPGSchema creates a fresh schema on GOAI_TEST_POSTGRES, dropped at
// cleanup, and returns a connection string that selects it.
func newPGSchema(t *testing.T) string {
	t.Helper()
	base := os.Getenv("GOAI_TEST_POSTGRES")
	if base == "" {
		t.Skip("GOAI_TEST_POSTGRES is not set: two-replica test skipped; run `eval \"$(scripts/setup-postgres.sh)\"` to start Postgres on loopback")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to GOAI_TEST_POSTGRES: %v", err)
	}
	name := "goai_e2e_" + strings.ToLower(rand.Text()[:12])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		admin.Close(ctx)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		admin.Close(ctx)
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// Two goai serve processes on one Postgres behave as one: a run started on
// A is hydrated, joined, re-attached and cancelled through B; a duplicate
// fresh POST on B starts no second producer; the cancel stops A's producer
// within a second.
func TestServeProcessTwoReplicasPostgres(t *testing.T) {
	pg := newPGSchema(t)
	bin := buildGoai(t)
	scenario := scenarioFile(t, 400, 25)
	a := startServe(t, bin, nil, "--model", "scripted:"+scenario, "--store", pg)
	b := startServe(t, bin, nil, "--model", "scripted:"+scenario, "--store", pg)
	const run = "run-replicas"
	hdr := map[string]string{"X-Run-Id": run}
	resA := open(t, context.Background(), http.MethodPost, a.url+"/api/chat", hdr, runBody(run))
	streamA := newFrameStream(resA.Body)
	defer streamA.stop()
	onA, _ := streamA.read(6)

	// Hydrate through B.
	if r := activeRun(t, b.url); r != run {
		t.Fatalf("hydrate on B: active run %q, want %q", r, run)
	}

	// Join through B, from the start, in the background.
	type result struct {
		fs  []agui.Frame
		end time.Time
	}
	joined := make(chan result, 1)
	resJ := open(t, context.Background(), http.MethodGet, b.url+"/api/chat?runId="+run+"&offset=-1", nil, "")
	go func() {
		fs, _ := readFrames(bufio.NewReader(resJ.Body), -1)
		joined <- result{fs, time.Now()}
	}()
	defer resJ.Body.Close()

	// Re-attach through B with Last-Event-ID: continues right after it.
	reHdr := map[string]string{"X-Run-Id": run, "Last-Event-ID": onA[len(onA)-1].ID}
	resR := open(t, context.Background(), http.MethodPost, b.url+"/api/chat", reHdr, runBody(run))
	reattached, _ := readFrames(bufio.NewReader(resR.Body), 3)
	resR.Body.Close()

	// A duplicate fresh POST on B is served the log, not a second run.
	resD := open(t, context.Background(), http.MethodPost, b.url+"/api/chat", hdr, runBody(run))
	dup, _ := readFrames(bufio.NewReader(resD.Body), 4)
	resD.Body.Close()

	// Cancel through B; A's producer stops within a second.
	cancelAt := time.Now()
	cres := open(t, context.Background(), http.MethodPost, b.url+"/api/chat/cancel", nil, `{"runId":"`+run+`"}`)
	cres.Body.Close()
	var j result
	select {
	case j = <-joined:
	case <-time.After(10 * time.Second):
		t.Fatal("B's joiner did not end after the cancel")
	}
	restA, cleanA := streamA.read(-1)
	resA.Body.Close()
	if !cleanA {
		t.Errorf("A's stream broke after %d frames", len(onA)+len(restA))
	}
	stopped := j.end.Sub(cancelAt)

	full := joinAll(t, a.url, run)
	checkExactlyOnce(t, "joined through B", j.fs, full)
	checkExactlyOnce(t, "started on A", append(onA, restA...), full)
	checkRanOnce(t, full, wantText(400))
	last := full[len(full)-1].Event
	if last.Type != agui.RunError || last.Code != "cancelled" {
		t.Fatalf("log ends with %s %q %q, want RUN_ERROR cancelled", last.Type, last.Code, last.Message)
	}
	if stopped > 2*time.Second { // the poll is 500ms; the rest is slack for a loaded machine
		t.Fatalf("the cancel recorded on B took %v to stop A's producer", stopped)
	}
	n := len(onA)
	if len(reattached) != 3 || reattached[0].ID != full[n].ID {
		t.Fatalf("re-attach on B did not continue after %s: got %d frames starting %v", onA[n-1].ID, len(reattached), reattached)
	}
	if len(dup) != 4 || dup[0].ID != full[0].ID {
		t.Fatalf("duplicate fresh POST on B was not served the log from the start")
	}
	if strings.Contains(a.stderr.String()+b.stderr.String(), "script exhausted") {
		t.Fatal("the model was called twice")
	}
	eventuallyInactive(t, a.url)
	eventuallyInactive(t, b.url)
	t.Logf("cancel through B stopped A's producer and ended B's joiner in %v; log of %d events", stopped.Round(time.Millisecond), len(full))
}

// A replica dies (kill -9) mid-run: another replica on the same Postgres
// reclaims the run once its lease lapses, so a reader joined through the
// survivor ends with RUN_ERROR producer-lost instead of waiting forever.
func TestServeProcessReplicaDiesPostgres(t *testing.T) {
	pg := newPGSchema(t)
	bin := buildGoai(t)
	scenario := scenarioFile(t, 400, 25)
	env := []string{"GOAI_LEASE=1s"}
	a := startServe(t, bin, env, "--model", "scripted:"+scenario, "--store", pg)
	b := startServe(t, bin, env, "--model", "scripted:"+scenario, "--store", pg)
	const run = "run-replica-dies"
	resA := open(t, context.Background(), http.MethodPost, a.url+"/api/chat", map[string]string{"X-Run-Id": run}, runBody(run))
	acked, _ := readFrames(bufio.NewReader(resA.Body), 8)
	resJ := open(t, context.Background(), http.MethodGet, b.url+"/api/chat?runId="+run+"&offset=-1", nil, "")
	killed := time.Now()
	a.kill()
	resA.Body.Close()
	joined := readAllWithin(t, resJ, 20*time.Second)
	ended := time.Since(killed)
	full := joinAll(t, b.url, run)
	checkExactlyOnce(t, "joined through the survivor", joined, full)
	checkExactlyOnce(t, "acknowledged by the dead replica", acked, full[:len(acked)])
	checkRanOnce(t, full, wantText(400))
	if last := full[len(full)-1].Event; last.Type != agui.RunError || last.Code != server.ProducerLostCode {
		t.Fatalf("log ends with %s %q, want RUN_ERROR %s", last.Type, last.Code, server.ProducerLostCode)
	}
	eventuallyInactive(t, b.url)
	t.Logf("replica A killed; B reclaimed the run and its joiner ended %v later (lease 1s)", ended.Round(time.Millisecond))
}
