package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func runGoai(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHelpForEveryCommand(t *testing.T) {
	for _, c := range commands() {
		for _, args := range [][]string{{"help", c.name}, {c.name, "--help"}, {c.name, "-h"}} {
			code, out, errOut := runGoai(t, args...)
			if code != 0 || errOut != "" {
				t.Errorf("goai %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
			}
			if !strings.HasPrefix(out, "usage: goai "+c.name) || !strings.Contains(out, c.summary[1:]) {
				t.Errorf("goai %s: output does not describe the command:\n%s", strings.Join(args, " "), out)
			}
		}
	}
}

func TestServeHelpListsFlagsAndEnvironment(t *testing.T) {
	t.Setenv("GOAI_STORE", "postgres://app:s3cret@db.example/goai")
	code, out, _ := runGoai(t, "serve", "--addr", "127.0.0.1:0", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"flags:", "-addr", "-model", "-store", "-wire", "environment:", "GOAI_MODEL", "OPENAI_API_KEY", "GOAI_LEASE"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") || !strings.Contains(out, "postgres://app:xxxxx@db.example/goai") {
		t.Errorf("serve help must show the store default with its password masked:\n%s", out)
	}
}

func TestWatchAndRunHelpShowTheirFlags(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"watch":         {"-poll", "-diff", "-ignore"},
		"run":           {"-format", "-wire", "-scenario"},
		"mock-provider": {"-api", "-record"},
	} {
		_, out, _ := runGoai(t, "help", cmd)
		for _, f := range flags {
			if !strings.Contains(out, "\n  "+f) {
				t.Errorf("goai help %s lacks flag %s:\n%s", cmd, f, out)
			}
		}
	}
}

func TestTopLevelUsage(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, out, _ := runGoai(t, args...)
		if code != 0 || !strings.Contains(out, "commands:") || !strings.Contains(out, "version") {
			t.Errorf("goai %v: exit %d\n%s", args, code, out)
		}
	}
	code, out, errOut := runGoai(t)
	if code != 2 || out != "" || !strings.Contains(errOut, "commands:") {
		t.Errorf("goai with no command: exit %d, stdout %q", code, out)
	}
	code, _, errOut = runGoai(t, "frobnicate")
	if code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runGoai(t, "help", "frobnicate")
	if code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("help for an unknown command: exit %d, stderr %q", code, errOut)
	}
}

func TestVersionLine(t *testing.T) {
	line := versionLine(&debug.BuildInfo{
		GoVersion: "go1.26.10",
		Main:      debug.Module{Path: "github.com/goai-sdk/goai", Version: "v0.3.1"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"},
			{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	})
	if want := "goai github.com/goai-sdk/goai v0.3.1 revision 0123abcd+dirty 2026-12-01T10:00:00Z go1.26.10"; line != want {
		t.Errorf("versionLine = %q, want %q", line, want)
	}
	code, out, _ := runGoai(t, "version")
	if code != 0 || !strings.HasPrefix(out, "goai ") {
		t.Errorf("goai version: exit %d, %q", code, out)
	}
	if code, _, _ := runGoai(t, "version", "extra"); code != 2 {
		t.Errorf("goai version extra: exit %d, want 2", code)
	}
}

// TestVersionOfBuiltBinary builds the command from this git checkout and
// checks that the revision the go command stamped is the one printed.
func TestVersionOfBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	// The go command finds the repository only through a .git directory:
	// a linked worktree (where .git is a file) builds without VCS stamps.
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		t.Skip("a git worktree: the go command does not stamp VCS information here")
	}
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "goai")
	// -buildvcs=true overrides a GOFLAGS=-buildvcs=false in the environment.
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "revision " + strings.TrimSpace(string(rev)); !strings.Contains(string(out), want) {
		t.Errorf("goai version = %q, want it to contain %q", out, want)
	}
}

func TestRunTakesTheScenarioPositionally(t *testing.T) {
	file := filepath.Join("..", "..", "conformance", "scenarios", "01-plain-text.json")
	codeFlag, byFlag, _ := runGoai(t, "run", "--format", "ndjson", "--scenario", file)
	codePos, byArg, errOut := runGoai(t, "run", file, "--format", "ndjson")
	if codeFlag != 0 || codePos != 0 || byArg == "" || byArg != byFlag {
		t.Fatalf("goai run FILE: exit %d (%s), output differs from --scenario (exit %d)", codePos, errOut, codeFlag)
	}
	if code, _, errOut := runGoai(t, "run", file, file); code != 2 || !strings.Contains(errOut, "one scenario") {
		t.Errorf("two files: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runGoai(t, "run"); code != 2 || !strings.Contains(errOut, "FILE is required") {
		t.Errorf("no file: exit %d, %q", code, errOut)
	}
}

func TestEnvSize(t *testing.T) {
	for v, want := range map[string]int64{"": 0, "none": -1, "4096": 4096, "512MiB": 512 << 20, "2 GiB": 2 << 30, "64KiB": 64 << 10} {
		t.Setenv("GOAI_WAL_LIMIT", v)
		if got, err := envSize("GOAI_WAL_LIMIT"); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"0", "-5", "1GB", "lots", "9999999999GiB"} {
		t.Setenv("GOAI_WAL_LIMIT", v)
		if _, err := envSize("GOAI_WAL_LIMIT"); err == nil || !strings.Contains(err.Error(), "GOAI_WAL_LIMIT") {
			t.Errorf("%q: error %v, want one naming GOAI_WAL_LIMIT", v, err)
		}
	}
}

func TestSQLiteOptionsCommitGap(t *testing.T) {
	t.Setenv("GOAI_WAL_LIMIT", "")
	t.Setenv("GOAI_COMMIT_GAP_MAX", "")
	for v, want := range map[string]time.Duration{"": defaultCommitGap, "0": 0, "1ms": time.Millisecond, "500us": 500 * time.Microsecond, "100ms": 100 * time.Millisecond} {
		t.Setenv("GOAI_COMMIT_GAP", v)
		if o, err := sqliteOptions(); err != nil || o.CommitGap != want {
			t.Errorf("%q: %+v, %v; want a gap of %v", v, o, err, want)
		}
	}
	for _, v := range []string{"-1ms", "1s", "soon", "5"} {
		t.Setenv("GOAI_COMMIT_GAP", v)
		if _, err := sqliteOptions(); err == nil || !strings.Contains(err.Error(), "GOAI_COMMIT_GAP") {
			t.Errorf("%q: error %v, want one naming GOAI_COMMIT_GAP", v, err)
		}
	}
}

// The gap's ceiling: 5 ms unless set, never below the gap (and none with
// no gap), and a bad value is refused naming the variable.
func TestSQLiteOptionsCommitGapMax(t *testing.T) {
	t.Setenv("GOAI_WAL_LIMIT", "")
	for _, c := range []struct {
		gap, max string
		want     time.Duration
	}{
		{"", "", defaultCommitGapMax},
		{"0", "", 0},
		{"10ms", "", 10 * time.Millisecond},
		{"", "2ms", 2 * time.Millisecond},
		{"1ms", "20ms", 20 * time.Millisecond},
	} {
		t.Setenv("GOAI_COMMIT_GAP", c.gap)
		t.Setenv("GOAI_COMMIT_GAP_MAX", c.max)
		if o, err := sqliteOptions(); err != nil || o.CommitGapMax != c.want {
			t.Errorf("gap %q, max %q: %+v, %v; want a ceiling of %v", c.gap, c.max, o, err, c.want)
		}
	}
	for _, c := range [][2]string{{"", "1ms"}, {"", "1s"}, {"", "soon"}, {"3ms", "-1ms"}} {
		t.Setenv("GOAI_COMMIT_GAP", c[0])
		t.Setenv("GOAI_COMMIT_GAP_MAX", c[1])
		if _, err := sqliteOptions(); err == nil || !strings.Contains(err.Error(), "GOAI_COMMIT_GAP_MAX") {
			t.Errorf("gap %q, max %q: error %v, want one naming GOAI_COMMIT_GAP_MAX", c[0], c[1], err)
		}
	}
}
