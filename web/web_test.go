package web_test

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goai-sdk/goai/web"
)

var (
	buildOnce sync.Once
	goaiBin   string
	buildErr  error
)

// goai builds the goai binary once per test run.
func goai(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs goai serve and Chromium; skipped in -short mode")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "goai-web-test-")
		if err != nil {
			buildErr = err
			return
		}
		goaiBin = filepath.Join(dir, "goai")
		out, err := exec.Command("go", "build", "-o", goaiBin, "github.com/goai-sdk/goai/cmd/goai").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return goaiBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if goaiBin != "" {
		os.RemoveAll(filepath.Dir(goaiBin))
	}
	os.Exit(code)
}

// server is a goai serve process.
type server struct {
	url, data string
}

// serve starts goai serve with its own store and data directory.
func serve(t *testing.T, args ...string) server {
	t.Helper()
	bin := goai(t)
	data := t.TempDir()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--store", "sqlite:" + filepath.Join(data, "goai.db")}, args...)...)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=", "GEMINI_API_KEY=", "GOAI_MODEL=", "GOAI_SANDBOX=", "GOAI_WORKSPACE=", "GOAI_POLICY=")
	var stderr strings.Builder
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return stderr.Write(p) })
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("goai serve stderr:\n%s", stderr.String())
			mu.Unlock()
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
	l, ok := <-line
	i := strings.Index(l, "http://")
	if !ok || i < 0 {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("goai serve did not start: %q\n%s", l, stderr.String())
	}
	t.Logf("%s", l)
	return server{url: strings.Fields(l[i:])[0], data: data}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// scenario writes a scripted model file.
func scenario(t *testing.T, turns ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(path, []byte(`{"name":"page","turns":[`+strings.Join(turns, ",")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func text(id, s string) string {
	return fmt.Sprintf(`{"type":"TEXT_MESSAGE_START","messageId":%q,"role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":%q,"delta":%q},{"type":"TEXT_MESSAGE_END","messageId":%q}`, id, id, s, id)
}

func toolCall(id, name, args string) string {
	return fmt.Sprintf(`{"type":"TOOL_CALL_START","toolCallId":%q,"toolCallName":%q,"index":0},{"type":"TOOL_CALL_ARGS","toolCallId":%q,"delta":%q},{"type":"TOOL_CALL_END","toolCallId":%q}`, id, name, id, args, id)
}

func turn(items ...string) string {
	finish := "stop"
	for _, it := range items {
		if strings.Contains(it, "TOOL_CALL_END") {
			finish = "tool_calls"
		}
	}
	return `[{"type":"RUN_STARTED","threadId":"t","runId":"r"},` + strings.Join(items, ",") + `,{"type":"RUN_FINISHED","threadId":"t","runId":"r","finishReason":"` + finish + `"}]`
}

// TestPageDemoRun: the offline demo end to end in the page: the workspace
// panel shows the file and its coloured diff, the command is approved in
// place, the answer is rendered as markdown, and a reload neither repeats
// ?q= nor loses anything. Model and user text never become HTML.
func TestPageDemoRun(t *testing.T) {
	srv := serve(t, "--model", "demo")
	p := newBrowser(t).newPage(1280, 900, false)
	q := `<img src=x onerror="document.body.dataset.pwned=1">write me a program`
	p.navigate(srv.url + "/?q=" + url.QueryEscape(q))
	if got := p.str("location.search"); got != "" {
		t.Errorf("?q= left in the URL: %q", got)
	}
	p.waitFor("the approval", `document.querySelector('details.tool button.approve')`)
	p.waitFor("greet.sh's diff in the panel", `[...document.querySelectorAll('#diff .add')].some(e => e.textContent.includes('[ $# -eq 0 ] && set -- world'))`)
	if n := p.num(`document.querySelectorAll('#tree li[data-path="/workspace/greet.sh"]').length`); n != 1 {
		t.Errorf("greet.sh in the file tree %d times", n)
	}
	if got := p.str(`[...document.querySelectorAll('details.tool summary')].map(s => s.textContent).join(' | ')`); !strings.Contains(got, "list_files") || !strings.Contains(got, "write_file") || !strings.Contains(got, "edit_file") || !strings.Contains(got, "run_command sh greet.sh goai") {
		t.Errorf("tool calls: %s", got)
	}
	if p.str(`document.getElementById('send').disabled ? 'disabled' : 'enabled'`) != "disabled" {
		t.Error("Send is enabled while an approval is pending")
	}
	if !strings.Contains(p.str(`document.getElementById('status').textContent`), "model: offline demo · sandbox: ") {
		t.Errorf("status line %q", p.str(`document.getElementById('status').textContent`))
	}
	if p.str(`document.getElementById('demo').hidden ? 'hidden' : 'shown'`) != "shown" {
		t.Error("the offline demo banner is hidden")
	}
	p.screenshot("approval")

	p.click("details.tool button.approve")
	p.waitFor("the run to finish", `document.body.dataset.state === 'finished'`)
	p.waitFor("the explanation", `[...document.querySelectorAll('.msg.assistant pre code')].some(e => e.textContent === 'Hello, goai!')`)
	if n := p.num(`document.querySelectorAll('.msg.assistant ol li').length`); n != 4 {
		t.Errorf("markdown list items: %d", n)
	}
	if p.str(`document.body.dataset.pwned || ''`) != "" || p.num(`document.querySelectorAll('#log img').length`) != 0 {
		t.Fatal("user text was injected as HTML")
	}
	if got := p.str(`document.querySelector('.msg.user').textContent`); got != q {
		t.Errorf("user message %q", got)
	}
	// Ids are 128 random bits: nobody guesses a thread before its owner
	// has used it.
	if got := p.str(`localStorage.getItem('goai.threadId')`); !regexp.MustCompile(`^thread-[0-9a-f]{32}$`).MatchString(got) {
		t.Errorf("thread id %q", got)
	}
	p.eval(`document.querySelector('#tree button').click()`, nil)
	p.screenshot("finished")
	if os.Getenv("GOAI_UPDATE_SCREENSHOT") != "" {
		b, err := os.ReadFile(p.screenshot("finished"))
		if err == nil {
			err = os.WriteFile(filepath.Join("..", "docs", "agent-workspace.png"), b, 0o644)
		}
		if err != nil {
			t.Error(err)
		}
	}

	// A reload re-renders the thread from the server and does not send
	// ?q= again.
	before := p.num(`document.querySelectorAll('#log > *').length`)
	p.reload()
	p.waitFor("the hydrated conversation", `document.body.dataset.done === 'true'`)
	if n := p.num(`document.querySelectorAll('.msg.user').length`); n != 1 {
		t.Errorf("%d user messages after a reload (?q= repeated?)", n)
	}
	if p.str(`document.body.dataset.runs || ''`) != "" {
		t.Error("a run started on reload")
	}
	if after := p.num(`document.querySelectorAll('#log > *').length`); after != before {
		t.Errorf("%d entries before the reload, %d after", before, after)
	}
	p.waitFor("greet.sh in the panel after a reload", `document.querySelector('#tree li[data-path="/workspace/greet.sh"]')`)

	// Phone width: nothing wider than the screen.
	phone := newBrowser(t).newPage(390, 844, true)
	phone.navigate(srv.url + "/")
	phone.waitFor("the page", `document.body.dataset.done === 'true'`)
	if w := phone.num(`document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("page is %dpx wide on a 390px screen", w)
	}
	phone.screenshot("phone")
}

// TestPageStopKeepsPartialAnswer: Stop cancels the run mid-answer; the
// partial answer stays, the run is marked cancelled, also after a reload.
// The message is typed and sent with the keyboard.
func TestPageStopKeepsPartialAnswer(t *testing.T) {
	// The durable producer appends events in batches (of 32, or at a tool
	// call's end): enough deltas come before the pause to be delivered.
	var words []string
	for i := range 40 {
		words = append(words, fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"w%d "}`, i))
	}
	partial := "Here is the partial answer, "
	for i := range 40 {
		partial += fmt.Sprintf("w%d ", i)
	}
	partial = strings.TrimSpace(partial)
	sc := scenario(t, turn(`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Here is the partial answer, "}`,
		strings.Join(words, ","),
		`{"delayMs":600000}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"never sent"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`))
	srv := serve(t, "--model", "scripted:"+sc, "--sandbox", "local")
	p := newBrowser(t).newPage(1280, 900, false)
	p.navigate(srv.url + "/")
	p.waitFor("the page", `document.body.dataset.done === 'true'`)
	p.typeAndEnter("start something long")
	p.waitFor("the partial answer", `document.querySelector('.msg.assistant')?.textContent.includes('partial answer')`)
	if p.str(`[document.getElementById('send').disabled, document.getElementById('stop').disabled].join()`) != "true,false" {
		t.Error("while streaming, Send must be disabled and Stop enabled")
	}
	p.click("#stop")
	p.waitFor("the run to be cancelled", `document.body.dataset.state === 'cancelled'`)
	check := func(when string) {
		t.Helper()
		if got := p.str(`[...document.querySelectorAll('.msg.assistant')].map(e => e.textContent.trim()).join('|')`); got != partial {
			t.Errorf("%s: assistant text %q", when, got)
		}
		if n := p.num(`document.querySelectorAll('.msg.error[data-code="cancelled"]').length`); n != 1 {
			t.Errorf("%s: %d cancelled notes", when, n)
		}
		if p.str(`document.getElementById('send').disabled ? 'disabled' : 'enabled'`) != "enabled" {
			t.Errorf("%s: Send stays disabled", when)
		}
	}
	check("after Stop")
	p.screenshot("cancelled")
	p.reload()
	p.waitFor("the hydrated conversation", `document.body.dataset.done === 'true'`)
	check("after a reload")
	if !strings.Contains(p.str(`document.getElementById('status').textContent`), "cancelled") {
		t.Errorf("status after reload: %q", p.str(`document.getElementById('status').textContent`))
	}
}

// TestPageProviderErrorSurvivesReload: a model error is shown in words with
// the partial answer, and both are still there after a reload.
func TestPageProviderErrorSurvivesReload(t *testing.T) {
	sc := scenario(t, `[{"type":"RUN_STARTED","threadId":"t","runId":"r"},`+text("m1", "Let me look into that")+`,{"type":"RUN_ERROR","message":"upstream model overloaded (HTTP 529)","code":"overloaded"}]`)
	srv := serve(t, "--model", "scripted:"+sc, "--sandbox", "local")
	p := newBrowser(t).newPage(1280, 900, false)
	p.navigate(srv.url + "/?q=hello")
	p.waitFor("the error", `document.body.dataset.state === 'error'`)
	check := func(when string) {
		t.Helper()
		if got := p.str(`[...document.querySelectorAll('.msg.error')].map(e => e.textContent).join('|')`); got != "Error: upstream model overloaded (HTTP 529)" {
			t.Errorf("%s: error notes %q", when, got)
		}
		if got := p.str(`[...document.querySelectorAll('.msg.assistant')].map(e => e.textContent).join('|')`); got != "Let me look into that" {
			t.Errorf("%s: partial answer %q", when, got)
		}
	}
	check("live")
	p.screenshot("error")
	p.reload()
	p.waitFor("the hydrated conversation", `document.body.dataset.done === 'true'`)
	check("after a reload")
}

// TestPageReloadMidRun: a reload while the run streams re-attaches; the
// answer and the panel complete without gaps or duplicates.
func TestPageReloadMidRun(t *testing.T) {
	sc := scenario(t,
		turn(text("m1", "Step one."), toolCall("c1", "write_file", `{"path":"a.txt","content":"first\n"}`)),
		turn(`{"delayMs":4000}`, text("m2", "Step two."), toolCall("c2", "write_file", `{"path":"dir/b.txt","content":"second\n"}`)),
		turn(text("m3", "All done.")))
	srv := serve(t, "--model", "scripted:"+sc, "--sandbox", "local")
	p := newBrowser(t).newPage(1280, 900, false)
	p.navigate(srv.url + "/?q=go")
	// The first tool call is delivered when its arguments end; the model's
	// next turn pauses 4 s, so the reload lands mid-run.
	p.waitFor("the first tool call", `document.querySelector('details.tool[data-tool-call-id="c1"]')`)
	p.reload()
	p.waitFor("the run to finish after the reload", `document.body.dataset.state === 'finished'`)
	if p.str(`document.body.dataset.attached || ''`) == "" {
		t.Error("the reloaded page did not re-attach to the running run")
	}
	if got := p.str(`[...document.querySelectorAll('.msg.assistant')].map(e => e.textContent).join('|')`); got != "Step one.|Step two.|All done." {
		t.Errorf("answer after re-attaching: %q", got)
	}
	if got := p.str(`[...document.querySelectorAll('details.tool')].map(e => e.dataset.toolCallId).join()`); got != "c1,c2" {
		t.Errorf("tool calls after re-attaching: %q", got)
	}
	p.waitFor("both files in the panel", `document.querySelectorAll('#tree li[data-path]').length === 2`)
	if got := p.str(`[...document.querySelectorAll('#tree li[data-path]')].map(e => e.dataset.path).join()`); got != "/workspace/a.txt,/workspace/dir/b.txt" {
		t.Errorf("file tree %q", got)
	}
	if n := p.num(`document.querySelectorAll('.msg.user').length`); n != 1 {
		t.Errorf("%d user messages", n)
	}
	p.screenshot("reattached")
}

// TestPageIsEmbedded: the binary carries the page, and the page allows no
// inline script (model output can never run as one).
func TestPageIsEmbedded(t *testing.T) {
	index, err := fs.ReadFile(web.FS, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"app.js", "app.css"} {
		if _, err := fs.Stat(web.FS, f); err != nil || !strings.Contains(string(index), f) {
			t.Errorf("%s: embedded %v, referenced %v", f, err == nil, strings.Contains(string(index), f))
		}
	}
	if !strings.Contains(string(index), "script-src 'self'") || strings.Contains(string(index), "<script>") {
		t.Error("index.html must forbid inline scripts")
	}
	js, _ := fs.ReadFile(web.FS, "app.js")
	if strings.Contains(string(js), "innerHTML") || strings.Contains(string(js), "insertAdjacentHTML") {
		t.Error("app.js must build the DOM without HTML strings")
	}
}

// TestPageLogin: against goai serve with a token, the page asks for it
// (GET /api/session), says so when it is wrong (POST /api/login: 401),
// works once it is right (a cookie session), and asks again when a later
// request is refused (any 401).
func TestPageLogin(t *testing.T) {
	srv := serve(t, "--model", "demo", "--sandbox", "local", "--token", "s3cret-token")
	p := newBrowser(t).newPage(1280, 900, false)
	p.navigate(srv.url + "/")
	p.waitFor("the sign-in form", `!document.getElementById('login').hidden && document.getElementById('app').hidden`)
	p.eval(`document.getElementById('token').value = 'wrong'`, nil)
	p.click(`#login-form button[type=submit]`)
	p.waitFor("the wrong-token message", `document.getElementById('login-error').textContent.includes('not right')`)
	p.screenshot("login")
	p.eval(`document.getElementById('token').value = 's3cret-token'`, nil)
	p.click(`#login-form button[type=submit]`)
	p.waitFor("the signed-in page", `document.getElementById('login').hidden && !document.getElementById('app').hidden && document.body.dataset.done === 'true'`)
	if got := p.str(`document.getElementById('status').textContent`); !strings.Contains(got, "model: offline demo") {
		t.Errorf("status %q", got)
	}
	// The session ends: the next request's 401 brings the form back.
	p.eval(`fetch('/api/logout', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'}).then(r => r.status)`, nil)
	p.typeAndEnter("hello")
	p.waitFor("the sign-in form again", `!document.getElementById('login').hidden`)
}
