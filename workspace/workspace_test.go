package workspace_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/sandbox"
	"github.com/goai-sdk/goai/sandbox/local"
	"github.com/goai-sdk/goai/workspace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newHandle returns a local sandbox over a fresh directory, and the
// directory.
func newHandle(t *testing.T) (sandbox.Handle, string) {
	t.Helper()
	dir := t.TempDir()
	keep := false
	p := local.New(local.Options{Dir: dir, RemoveOnDestroy: &keep})
	h, err := p.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	real, _ := filepath.EvalSymlinks(dir)
	return h, real
}

type tools map[string]*chat.Tool

func toolsFor(h sandbox.Handle, opts workspace.Options) tools {
	m := tools{}
	for _, t := range workspace.Tools(h, opts) {
		m[t.Name] = t
	}
	return m
}

// call runs a tool as the engine does and returns its result as JSON, or
// its error text.
func (ts tools) call(t *testing.T, name string, args any) (string, error) {
	t.Helper()
	b, _ := json.Marshal(args)
	v, err := ts[name].Execute(context.Background(), b)
	if err != nil {
		return "", err
	}
	out, _ := json.Marshal(v)
	return string(out), nil
}

func (ts tools) mustCall(t *testing.T, name string, args any) string {
	t.Helper()
	out, err := ts.call(t, name, args)
	if err != nil {
		t.Fatalf("%s(%v): %v", name, args, err)
	}
	return out
}

func (ts tools) mustFail(t *testing.T, name string, args any, want string) {
	t.Helper()
	out, err := ts.call(t, name, args)
	if err == nil {
		t.Fatalf("%s(%v) = %s, want an error containing %q", name, args, out, want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("%s(%v) error %q lacks %q", name, args, err, want)
	}
}

func TestFileTools(t *testing.T) {
	h, dir := newHandle(t)
	ts := toolsFor(h, workspace.Options{})

	if out := ts.mustCall(t, "write_file", map[string]any{"path": "src/main.go", "content": "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n"}); !strings.Contains(out, `"created":true`) {
		t.Errorf("write_file result %s", out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "src/main.go")); err != nil || !strings.Contains(string(b), "println") {
		t.Fatalf("file on disk: %q %v", b, err)
	}
	out := ts.mustCall(t, "list_files", map[string]any{})
	if !strings.Contains(out, `{"path":"src","type":"dir"}`) || !strings.Contains(out, `"path":"src/main.go","type":"file","size":45`) {
		t.Errorf("list_files %s", out)
	}
	out = ts.mustCall(t, "read_file", map[string]any{"path": "/workspace/src/main.go", "start_line": 3, "end_line": 4})
	var rf workspace.ReadFileOutput
	_ = json.Unmarshal([]byte(out), &rf)
	if rf.Content != "func main() {\n\tprintln(\"hi\")\n" || rf.StartLine != 3 || rf.EndLine != 4 || rf.TotalLines != 5 {
		t.Errorf("read_file range: %+v", rf)
	}
	ts.mustFail(t, "read_file", map[string]any{"path": "src/main.go", "start_line": 9}, "out of range; the file has 5 lines")

	ts.mustCall(t, "edit_file", map[string]any{"path": "src/main.go", "old_text": `println("hi")`, "new_text": `println("hello")`})
	if b, _ := os.ReadFile(filepath.Join(dir, "src/main.go")); !strings.Contains(string(b), `println("hello")`) {
		t.Errorf("edit not applied: %s", b)
	}
	ts.mustFail(t, "edit_file", map[string]any{"path": "src/main.go", "old_text": "nowhere", "new_text": "x"}, "old_text was not found")
	ts.mustFail(t, "edit_file", map[string]any{"path": "src/main.go", "old_text": "func  main()", "new_text": "x"}, "different whitespace")
	ts.mustCall(t, "write_file", map[string]any{"path": "twice.txt", "content": "a\na\n"})
	ts.mustFail(t, "edit_file", map[string]any{"path": "twice.txt", "old_text": "a", "new_text": "b"}, "occurs 2 times")
	if b, _ := os.ReadFile(filepath.Join(dir, "twice.txt")); string(b) != "a\na\n" {
		t.Errorf("a failed edit changed the file: %q", b)
	}
	if out := ts.mustCall(t, "edit_file", map[string]any{"path": "twice.txt", "old_text": "a", "new_text": "b", "replace_all": true}); !strings.Contains(out, `"replacements":2`) {
		t.Errorf("replace_all: %s", out)
	}
	ts.mustFail(t, "edit_file", map[string]any{"path": "missing.txt", "old_text": "a", "new_text": "b"}, "no such file")

	out = ts.mustCall(t, "search", map[string]any{"pattern": `print\w+`})
	if !strings.Contains(out, `{"path":"src/main.go","line":4,"text":"\tprintln(\"hello\")"}`) {
		t.Errorf("search: %s", out)
	}
	if out = ts.mustCall(t, "search", map[string]any{"pattern": "B", "ignore_case": true, "glob": "*.txt"}); !strings.Contains(out, `"path":"twice.txt","line":1`) || strings.Contains(out, "main.go") {
		t.Errorf("search with glob: %s", out)
	}
	ts.mustFail(t, "search", map[string]any{"pattern": "("}, "not a valid RE2")
}

func TestBadInputIsAToolError(t *testing.T) {
	h, dir := newHandle(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	ts := toolsFor(h, workspace.Options{MaxFileBytes: 1 << 20, MaxSearchMatches: 3})

	for _, p := range []string{"../x", "/etc/passwd", "/workspace/../etc/passwd", "a/../../b"} {
		ts.mustFail(t, "write_file", map[string]any{"path": p, "content": "x"}, "outside the workspace")
		ts.mustFail(t, "read_file", map[string]any{"path": p}, "outside the workspace")
	}
	ts.mustFail(t, "read_file", map[string]any{"path": "escape/secret"}, "outside the workspace")
	ts.mustFail(t, "write_file", map[string]any{"path": "escape/new", "content": "x"}, "outside the workspace")
	ts.mustFail(t, "edit_file", map[string]any{"path": "escape/secret", "old_text": "s3cret", "new_text": "x"}, "outside the workspace")
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s3cret" {
		t.Fatalf("a file outside the workspace changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Fatal("a file was created outside the workspace")
	}
	ts.mustFail(t, "write_file", map[string]any{"path": ".git/config", "content": "x"}, "inside .git")

	big := make([]byte, 2<<20)
	for i := range big {
		big[i] = 'a'
	}
	_ = os.WriteFile(filepath.Join(dir, "big.txt"), big, 0o644)
	ts.mustFail(t, "read_file", map[string]any{"path": "big.txt"}, "larger than the 1048576-byte limit")
	_ = os.WriteFile(filepath.Join(dir, "bin.dat"), []byte{0x7f, 'E', 'L', 'F', 0, 1, 2}, 0o644)
	ts.mustFail(t, "read_file", map[string]any{"path": "bin.dat"}, "binary file")
	ts.mustFail(t, "edit_file", map[string]any{"path": "bin.dat", "old_text": "ELF", "new_text": "x"}, "binary file")
	ts.mustFail(t, "write_file", map[string]any{"path": "huge.txt", "content": string(big)}, "more than the 1048576-byte limit")
	ts.mustFail(t, "read_file", map[string]any{"path": "."}, "directory")

	// A long line is cut at the read limit and says so.
	small := toolsFor(h, workspace.Options{MaxReadBytes: 100})
	_ = os.WriteFile(filepath.Join(dir, "lines.txt"), []byte(strings.Repeat("0123456789012345678\n", 20)), 0o644)
	var rf workspace.ReadFileOutput
	_ = json.Unmarshal([]byte(small.mustCall(t, "read_file", map[string]any{"path": "lines.txt"})), &rf)
	if !rf.Truncated || rf.EndLine != 5 || len(rf.Content) != 100 {
		t.Errorf("bounded read: %+v", rf)
	}

	// search skips binary and huge files and stops at its limit.
	for i := range 5 {
		_ = os.WriteFile(filepath.Join(dir, "m"+string(rune('0'+i))+".txt"), []byte("needle\n"), 0o644)
	}
	out := ts.mustCall(t, "search", map[string]any{"pattern": "needle|ELF|aaaa"})
	var so workspace.SearchOutput
	_ = json.Unmarshal([]byte(out), &so)
	if len(so.Matches) != 3 || !so.Truncated || so.Skipped == 0 {
		t.Errorf("bounded search: %s", out)
	}
}

func TestRunCommand(t *testing.T) {
	h, dir := newHandle(t)
	policy, err := workspace.ParsePolicy([]byte(`{"commands":{"allow":["echo *","go run *"],"deny":["rm -rf *","sudo *"]},"default":"ask"}`))
	if err != nil {
		t.Fatal(err)
	}
	ts := toolsFor(h, workspace.Options{Policy: policy, MaxOutputBytes: 1000, CommandTimeout: 20 * time.Second})

	out := ts.mustCall(t, "run_command", map[string]any{"command": "echo hello; echo oops >&2; exit 3"})
	var r workspace.RunCommandOutput
	_ = json.Unmarshal([]byte(out), &r)
	if r.ExitCode != 3 || r.Stdout != "hello\n" || r.Stderr != "oops\n" {
		t.Errorf("run_command: %+v", r)
	}
	ts.mustFail(t, "run_command", map[string]any{"command": "rm -rf /"}, `the command policy denies "rm -rf *"`)
	ts.mustFail(t, "run_command", map[string]any{"command": "  sudo ls"}, "not allowed")

	// Endless: killed at its timeout, the error says so and keeps what it printed.
	ts.mustFail(t, "run_command", map[string]any{"command": "echo started; sleep 600", "timeout_seconds": 1}, "did not finish within 1s and was killed; output so far:\nstarted")
	// Gigabytes of output: head and tail kept, the command killed once it
	// printed far more than the cap.
	_, err = ts.call(t, "run_command", map[string]any{"command": "yes goai"})
	if err == nil || !strings.Contains(err.Error(), "printed more than 64000 bytes and was killed") || !strings.Contains(err.Error(), "bytes left out") {
		t.Errorf("flood: %v", err)
	}
	out = ts.mustCall(t, "run_command", map[string]any{"command": "seq 1 2000"})
	_ = json.Unmarshal([]byte(out), &r)
	if !r.Truncated || !strings.HasPrefix(r.Stdout, "1\n2\n") || !strings.HasSuffix(r.Stdout, "1999\n2000\n") || len(r.Stdout) > 1100 {
		t.Errorf("long output: truncated=%v %d bytes %q…", r.Truncated, len(r.Stdout), r.Stdout[:20])
	}
	// Commands run in the workspace.
	_ = os.WriteFile(filepath.Join(dir, "f.txt"), []byte("x"), 0o644)
	if out = ts.mustCall(t, "run_command", map[string]any{"command": "ls"}); !strings.Contains(out, "f.txt") {
		t.Errorf("ls in the workspace: %s", out)
	}

	approve := ts["run_command"].NeedsApprovalFor
	for cmd, want := range map[string]bool{"echo hi": false, "go run main.go": false, "ls": true, "rm -rf /": false, "git push": true} {
		if got := approve(json.RawMessage(`{"command":` + strings.ReplaceAll(`"`+cmd+`"`, "\n", "") + `}`)); got != want {
			t.Errorf("NeedsApprovalFor(%q) = %v, want %v", cmd, got, want)
		}
	}
}

func TestPolicy(t *testing.T) {
	p := &workspace.Policy{Deny: []string{"sudo *", "rm -rf *"}}
	if p.Evaluate("sudo apt-get update") != workspace.Deny || p.Evaluate("confirm -rf safe") != workspace.Ask {
		t.Error("deny patterns")
	}
	p = &workspace.Policy{Allow: []string{"git *"}, Ask: []string{"git push *"}, Deny: []string{"git push --force*"}}
	for cmd, want := range map[string]workspace.Decision{"git status": workspace.Allow, "git push origin": workspace.Ask, "git push --force origin": workspace.Deny, "ls": workspace.Ask} {
		if got := p.Evaluate(cmd); got != want {
			t.Errorf("%q: %s, want %s", cmd, got, want)
		}
	}
	var nilPolicy *workspace.Policy
	if nilPolicy.Evaluate("ls") != workspace.Ask {
		t.Error("no policy must ask")
	}
	p = &workspace.Policy{Allow: []string{"test"}, Deny: []string{"deploy"}, Scripts: map[string]string{"test": "pnpm test"}}
	if p.Evaluate("pnpm test") != workspace.Allow || p.Evaluate("pnpm deploy") != workspace.Ask {
		t.Error("script aliases")
	}
	p = &workspace.Policy{Allow: []string{"a.b?"}}
	if p.Evaluate("a.b?") != workspace.Allow || p.Evaluate("axbc") != workspace.Ask {
		t.Error("metacharacters must be literal")
	}
	for _, bad := range []string{`{"default":"maybe"}`, `{"commands":{"allow":[""]}}`, `{"comands":{}}`, `nope`} {
		if _, err := workspace.ParsePolicy([]byte(bad)); err == nil {
			t.Errorf("ParsePolicy(%s) accepted", bad)
		}
	}
}
