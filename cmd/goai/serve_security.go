package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goai-sdk/goai/server"
)

// defaultPrincipal names the user of a single GOAI_TOKEN.
const defaultPrincipal = "default"

// loadTokens resolves the API tokens: --token (visible to local users in
// ps; prefer the others), GOAI_TOKEN, or GOAI_TOKEN_FILE. The file holds
// either one token, or one "principal token" pair per line (blank lines
// and # comments skipped) for several users. None: an open server.
func loadTokens(flagToken string, getenv func(string) string) (map[string]server.Principal, error) {
	if t := strings.TrimSpace(flagToken); t != "" {
		return map[string]server.Principal{t: defaultPrincipal}, nil
	}
	if t := strings.TrimSpace(getenv("GOAI_TOKEN")); t != "" {
		return map[string]server.Principal{t: defaultPrincipal}, nil
	}
	path := getenv("GOAI_TOKEN_FILE")
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("GOAI_TOKEN_FILE: %w", err)
	}
	return parseTokens(b)
}

// minTokenLen keeps guessable tokens out.
const minTokenLen = 16

func parseTokens(b []byte) (map[string]server.Principal, error) {
	tokens := map[string]server.Principal{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		var principal, token string
		switch len(fields) {
		case 1:
			principal, token = defaultPrincipal, fields[0]
		case 2:
			principal, token = fields[0], fields[1]
		default:
			// Never echo the line: it holds a token.
			return nil, fmt.Errorf("GOAI_TOKEN_FILE line %d: want a token, or a principal and a token", line)
		}
		if len(token) < minTokenLen {
			return nil, fmt.Errorf("GOAI_TOKEN_FILE line %d: the token is shorter than %d characters", line, minTokenLen)
		}
		if _, dup := tokens[token]; dup {
			return nil, fmt.Errorf("GOAI_TOKEN_FILE line %d: a token is listed twice", line)
		}
		tokens[token] = server.Principal(principal)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("GOAI_TOKEN_FILE: %w", err)
	}
	if len(tokens) == 0 {
		return nil, errors.New("GOAI_TOKEN_FILE holds no token")
	}
	return tokens, nil
}

// isLoopback reports whether a listen address only accepts local
// connections.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkExposure refuses a non-loopback address without a token unless
// insecure, saying why.
func checkExposure(addr string, tokens map[string]server.Principal, insecure bool) error {
	if isLoopback(addr) || len(tokens) > 0 || insecure {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without a token: anyone who can reach that address could read, drive and cancel every run. "+
		"Set GOAI_TOKEN or GOAI_TOKEN_FILE (or --token), bind a loopback address, or pass --insecure to serve it open anyway", addr)
}

// checkSharing refuses several principals on a server that keeps no run
// store while it runs the workspace agent: without a store nothing records
// who owns a thread, and a thread's workspace is found by the thread's id
// alone, so one user could run commands in, and read, another's workspace
// by naming its thread.
func checkSharing(store string, tokens map[string]server.Principal, agent bool) error {
	if storeKind(store) != "none" || !agent {
		return nil
	}
	principals := map[server.Principal]bool{}
	for _, p := range tokens {
		principals[p] = true
	}
	if len(principals) < 2 {
		return nil
	}
	return fmt.Errorf("refusing %d principals with --store none and the workspace agent: without a store nothing records who owns a thread, "+
		"so one user could run commands in another's workspace by naming its thread. Keep a store (the default is sqlite), serve one principal, or pass --no-tools", len(principals))
}

// serveLimits are the resource settings from the environment.
type serveLimits struct {
	maxRuns        int
	retention      time.Duration
	allowedOrigins []string
	allowedHosts   []string
	bodyTimeout    time.Duration
	releaseIdle    time.Duration // 0 default, <0 never
	rate           float64       // chat POSTs per second per principal; 0 default, <0 unbounded
}

func loadServeLimits(getenv func(string) string) (serveLimits, error) {
	l := serveLimits{maxRuns: 64, retention: 7 * 24 * time.Hour}
	if v := getenv("GOAI_MAX_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return l, fmt.Errorf("GOAI_MAX_RUNS: want a count (0: no cap), got %q", v)
		}
		l.maxRuns = n
	}
	if v := getenv("GOAI_RETENTION"); v != "" {
		d, err := parseRetention(v)
		if err != nil {
			return l, fmt.Errorf("GOAI_RETENTION: %w", err)
		}
		l.retention = d
	}
	if v := getenv("GOAI_BODY_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return l, fmt.Errorf("GOAI_BODY_TIMEOUT: want a positive duration, got %q", v)
		}
		l.bodyTimeout = d
	}
	if v := getenv("GOAI_RELEASE_IDLE_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if n, nerr := strconv.Atoi(v); nerr == nil && n <= 0 {
			d, err = -1, nil // a bare "0" or "-1": never
		}
		if err != nil {
			return l, fmt.Errorf("GOAI_RELEASE_IDLE_AFTER: want a duration like 1s (0 or negative: never), got %q", v)
		}
		if d == 0 {
			d = -1 // "0s": never, not the default
		}
		l.releaseIdle = d
	}
	if v := getenv("GOAI_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 {
			return l, fmt.Errorf("GOAI_RATE: want chat requests per second per user (0: no bound), got %q", v)
		}
		l.rate = r
		if r == 0 {
			l.rate = -1
		}
	}
	l.allowedOrigins = splitList(getenv("GOAI_ALLOWED_ORIGINS"))
	for _, o := range l.allowedOrigins {
		if !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			return l, fmt.Errorf("GOAI_ALLOWED_ORIGINS: %q is not an origin (scheme://host[:port])", o)
		}
	}
	l.allowedHosts = splitList(getenv("GOAI_ALLOWED_HOSTS"))
	return l, nil
}

// parseRetention reads a Go duration, or whole days as "7d"; 0 keeps
// everything.
func parseRetention(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("want a duration like 168h or 7d, got %q", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want a duration like 168h or 7d, got %q", v)
	}
	return d, nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
