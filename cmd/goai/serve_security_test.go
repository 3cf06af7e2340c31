package main

import (
	"strings"
	"testing"
	"time"

	"github.com/goai-sdk/goai/server"
)

func TestParseTokens(t *testing.T) {
	got, err := parseTokens([]byte("# users\nalice aaaaaaaaaaaaaaaaaaaa\n\nbob bbbbbbbbbbbbbbbbbbbb\n"))
	if err != nil || len(got) != 2 || got["aaaaaaaaaaaaaaaaaaaa"] != "alice" || got["bbbbbbbbbbbbbbbbbbbb"] != "bob" {
		t.Fatalf("%v %v", got, err)
	}
	got, err = parseTokens([]byte("  cccccccccccccccccccc  \n"))
	if err != nil || got["cccccccccccccccccccc"] != defaultPrincipal {
		t.Fatalf("single token: %v %v", got, err)
	}
	for _, bad := range []string{"", "# only a comment\n", "alice short\n", "a b c\n", "a dddddddddddddddddddd\nb dddddddddddddddddddd\n"} {
		_, err := parseTokens([]byte(bad))
		if err == nil {
			t.Fatalf("accepted %q", bad)
		}
		if strings.Contains(err.Error(), "dddddddd") {
			t.Fatalf("the error echoes a token: %v", err)
		}
	}
}

func TestCheckExposure(t *testing.T) {
	for addr, wantErr := range map[string]bool{
		"127.0.0.1:8080": false, "[::1]:0": false, "localhost:80": false,
		"0.0.0.0:8080": true, ":8080": true, "192.168.1.5:80": true,
	} {
		err := checkExposure(addr, nil, false)
		if (err != nil) != wantErr {
			t.Fatalf("%s: %v", addr, err)
		}
		if err != nil && !strings.Contains(err.Error(), "--insecure") {
			t.Fatalf("the refusal does not say how: %v", err)
		}
		if checkExposure(addr, nil, true) != nil {
			t.Fatalf("%s refused with --insecure", addr)
		}
	}
}

// Without a store, nothing keeps users' threads (and so their workspaces)
// apart: several principals are refused while the agent runs.
func TestCheckSharing(t *testing.T) {
	two := map[string]server.Principal{"t1": "alice", "t2": "bob"}
	oneTwice := map[string]server.Principal{"t1": "alice", "t2": "alice"}
	for _, c := range []struct {
		store  string
		tokens map[string]server.Principal
		agent  bool
		refuse bool
	}{
		{"none", two, true, true},
		{"", two, true, true},
		{"none", two, false, false},
		{"none", oneTwice, true, false},
		{"none", nil, true, false},
		{"sqlite:x.db", two, true, false},
		{"memory", two, true, false},
	} {
		err := checkSharing(c.store, c.tokens, c.agent)
		if (err != nil) != c.refuse {
			t.Fatalf("%+v: %v", c, err)
		}
		if err != nil && !strings.Contains(err.Error(), "--store none") {
			t.Fatalf("the refusal does not name the setting: %v", err)
		}
	}
}

func TestParseRetention(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "36h": 36 * time.Hour, "0": 0} {
		if got, err := parseRetention(in); err != nil || got != want {
			t.Fatalf("%s: %v %v", in, got, err)
		}
	}
	for _, bad := range []string{"x", "-1d", "-5m"} {
		if _, err := parseRetention(bad); err == nil {
			t.Fatalf("accepted %q", bad)
		}
	}
}

func TestReleaseIdleAfterSetting(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "2s": 2 * time.Second, "250ms": 250 * time.Millisecond, "0": -1, "-1": -1, "-1s": -time.Second} {
		l, err := loadServeLimits(func(k string) string {
			if k == "GOAI_RELEASE_IDLE_AFTER" {
				return v
			}
			return ""
		})
		if err != nil || l.releaseIdle != want {
			t.Errorf("GOAI_RELEASE_IDLE_AFTER=%q: %v, %v; want %v", v, l.releaseIdle, err, want)
		}
	}
	for _, bad := range []string{"5", "soon", "1 s"} {
		_, err := loadServeLimits(func(k string) string {
			if k == "GOAI_RELEASE_IDLE_AFTER" {
				return bad
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), "GOAI_RELEASE_IDLE_AFTER") {
			t.Errorf("GOAI_RELEASE_IDLE_AFTER=%q: %v, want an error naming it", bad, err)
		}
	}
}
