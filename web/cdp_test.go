package web_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// browser drives headless Chromium over the DevTools protocol on a pipe
// (--remote-debugging-pipe: commands on fd 3, replies on fd 4, each JSON
// message ended by a NUL byte), so the tests need nothing but the binary.
type browser struct {
	t    *testing.T
	cmd  *exec.Cmd
	in   io.WriteCloser
	done chan struct{}

	mu      sync.Mutex
	nextID  int
	waiters map[int]chan cdpReply
	logs    []string // console output and exceptions of the page
}

type cdpReply struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func chromium(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is required (scripts/setup-chromium.sh installs it)")
		}
		t.Skip("chromium not installed; scripts/setup-chromium.sh installs it")
	}
	return bin
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	bin := chromium(t)
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// The profile directory is removed only after the whole browser (its
	// renderer and utility processes too) is gone: they write into it.
	profile, err := os.MkdirTemp("", "goai-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--user-data-dir="+profile, "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmdR.Close()
	outW.Close()
	b := &browser{t: t, cmd: cmd, in: cmdW, done: make(chan struct{}), waiters: map[int]chan cdpReply{}}
	go b.read(outR)
	t.Cleanup(func() {
		cmdW.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the browser's process group
		_ = cmd.Wait()
		<-b.done
		// A child that was mid-write when killed may still be exiting.
		for i := 0; i < 50 && syscall.Kill(-cmd.Process.Pid, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		_ = os.RemoveAll(profile)
		if t.Failed() {
			b.mu.Lock()
			t.Logf("page console:\n%s", strings.Join(b.logs, "\n"))
			b.mu.Unlock()
		}
	})
	return b
}

func (b *browser) read(r io.ReadCloser) {
	defer close(b.done)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var rep cdpReply
		if json.Unmarshal(msg[:len(msg)-1], &rep) != nil {
			continue
		}
		b.mu.Lock()
		if rep.ID != 0 {
			if ch, ok := b.waiters[rep.ID]; ok {
				ch <- rep
				delete(b.waiters, rep.ID)
			}
		} else if rep.Method == "Runtime.consoleAPICalled" || rep.Method == "Runtime.exceptionThrown" {
			b.logs = append(b.logs, rep.Method+" "+string(rep.Params))
		}
		b.mu.Unlock()
	}
}

// call sends a command (to a page session when session is set) and waits
// for its reply.
func (b *browser) call(session, method string, params any) (json.RawMessage, error) {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpReply, 1)
	b.waiters[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, _ := json.Marshal(msg)
	if _, err := b.in.Write(append(raw, 0)); err != nil {
		return nil, err
	}
	select {
	case rep := <-ch:
		if rep.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, rep.Error.Message)
		}
		return rep.Result, nil
	case <-b.done:
		return nil, fmt.Errorf("%s: the browser exited", method)
	case <-time.After(2 * time.Minute):
		return nil, fmt.Errorf("%s: no reply", method)
	}
}

// page is one tab.
type page struct {
	t       *testing.T
	b       *browser
	session string
}

func (b *browser) newPage(width, height int, mobile bool) *page {
	b.t.Helper()
	res, err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"})
	if err != nil {
		b.t.Fatal(err)
	}
	var tgt struct {
		TargetID string `json:"targetId"`
	}
	_ = json.Unmarshal(res, &tgt)
	res, err = b.call("", "Target.attachToTarget", map[string]any{"targetId": tgt.TargetID, "flatten": true})
	if err != nil {
		b.t.Fatal(err)
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(res, &att)
	p := &page{t: b.t, b: b, session: att.SessionID}
	p.must("Page.enable", nil)
	p.must("Runtime.enable", nil)
	p.must("Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
	return p
}

func (p *page) must(method string, params any) json.RawMessage {
	p.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	res, err := p.b.call(p.session, method, params)
	if err != nil {
		p.t.Fatal(err)
	}
	return res
}

// eval evaluates a JavaScript expression (promises awaited) and decodes
// its value into v.
func (p *page) eval(expr string, v any) {
	p.t.Helper()
	res := p.must("Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true})
	var out struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		p.t.Fatal(err)
	}
	if out.Exception != nil {
		p.t.Fatalf("evaluating %s: %s %s", expr, out.Exception.Text, out.Exception.Exception.Description)
	}
	if v != nil && len(out.Result.Value) > 0 {
		if err := json.Unmarshal(out.Result.Value, v); err != nil {
			p.t.Fatalf("evaluating %s: %v (%s)", expr, err, out.Result.Value)
		}
	}
}

func (p *page) str(expr string) string {
	p.t.Helper()
	var s string
	p.eval(expr, &s)
	return s
}

func (p *page) num(expr string) int {
	p.t.Helper()
	var n int
	p.eval(expr, &n)
	return n
}

// waitFor polls a JavaScript condition until it holds. The deadline only
// guards against a hang; no test measures time.
func (p *page) waitFor(what, cond string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var ok bool
		p.eval("!!("+cond+")", &ok)
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			p.screenshot("timeout-" + strings.ReplaceAll(what, " ", "-"))
			p.t.Fatalf("waiting for %s (%s); page text:\n%s", what, cond, p.str("document.body.innerText"))
		case <-tick.C:
		}
	}
}

func (p *page) navigate(url string) {
	p.t.Helper()
	p.must("Page.navigate", map[string]any{"url": url})
	p.waitFor("the page to load", "document.readyState === 'complete' && document.body.dataset.state !== 'loading'")
}

func (p *page) reload() {
	p.t.Helper()
	p.eval("document.body.dataset.state = 'loading'", nil)
	p.must("Page.reload", map[string]any{})
	p.waitFor("the page to reload", "document.readyState === 'complete' && document.body.dataset.state && document.body.dataset.state !== 'loading'")
}

func (p *page) click(selector string) {
	p.t.Helper()
	var ok bool
	p.eval(fmt.Sprintf("(() => { const e = document.querySelector(%q); if (!e || e.disabled) return false; e.click(); return true })()", selector), &ok)
	if !ok {
		p.t.Fatalf("no enabled %s to click", selector)
	}
}

// typeAndEnter types text into the focused message box and presses Enter,
// as a keyboard user would.
func (p *page) typeAndEnter(text string) {
	p.t.Helper()
	p.eval("document.getElementById('q').focus()", nil)
	p.must("Input.insertText", map[string]any{"text": text})
	for _, typ := range []string{"keyDown", "keyUp"} {
		p.must("Input.dispatchKeyEvent", map[string]any{"type": typ, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r"})
	}
}

// artifacts is where screenshots go: $GOAI_ARTIFACTS, else .artifacts/web
// at the repository root (ignored by git).
func artifacts(t *testing.T) string {
	dir := os.Getenv("GOAI_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", ".artifacts", "web")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves the page as <artifacts>/<test>-<name>.png and returns
// the path.
func (p *page) screenshot(name string) string {
	res, err := p.b.call(p.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": false})
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	var shot struct {
		Data string `json:"data"`
	}
	_ = json.Unmarshal(res, &shot)
	png, _ := base64.StdEncoding.DecodeString(shot.Data)
	path := filepath.Join(artifacts(p.t), strings.ReplaceAll(p.t.Name(), "/", "_")+"-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
	}
	return path
}
