package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/goai-sdk/goai/chat"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BridgeServerName is the MCP server name a bridge announces; agents see
// its tools as mcp__tanstack__<tool>.
const BridgeServerName = "tanstack"

// BridgeOptions configure StartBridge.
type BridgeOptions struct {
	// Call runs a tool. An adapter passes the run's chat.ToolRunner
	// (chat.ToolRunnerCapability) so bridged calls go through the engine's
	// tool path: middleware hooks, approvals, the tool cache, CUSTOM events.
	Call CallFunc
	// Remote binds every interface (0.0.0.0) instead of 127.0.0.1, for a
	// sandbox that reaches the host as host.docker.internal; HostForSandbox
	// is the host name put in URL ("127.0.0.1" by default).
	Remote         bool
	HostForSandbox string
	Logger         *slog.Logger
}

// Bridge is a running tool bridge: an MCP server on a port chosen by the
// kernel, answering only requests that carry its bearer token.
type Bridge struct {
	// URL is what the sandbox is given: http://<host>:<port>/mcp.
	URL   string
	token string
	srv   *http.Server
	done  chan struct{}
}

// Token is the bearer token. Write it to a file the agent reads (never to
// argv or a log); a Bridge's String and LogValue leave it out.
func (b *Bridge) Token() string { return b.token }

func (b *Bridge) String() string { return "mcp bridge " + b.URL }

// LogValue keeps the token out of structured logs.
func (b *Bridge) LogValue() slog.Value { return slog.StringValue(b.String()) }

// StartBridge serves specs as the MCP server "tanstack". The listener binds
// port 0 on loopback (or every interface with Remote); the token is 24
// random bytes in hex, compared in constant time; a request without it gets
// 401. Close stops it.
func StartBridge(specs []chat.ToolSpec, opts BridgeOptions) (*Bridge, error) {
	srv, err := NewFromSpecs(specs, Options{Name: BridgeServerName, Version: "1.0.0", Call: opts.Call, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("mcpserver: bridge token: %w", err)
	}
	token := hex.EncodeToString(raw[:])
	bind, host := "127.0.0.1", opts.HostForSandbox
	if opts.Remote {
		bind = "0.0.0.0"
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(bind, "0"))
	if err != nil {
		return nil, fmt.Errorf("mcpserver: bridge listener: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Logger: log,
		// The token is the protection; a sandbox calls with its own Host.
		DisableLocalhostProtection: opts.Remote,
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", RequireBearer(token, h))
	b := &Bridge{
		URL:   "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/mcp",
		token: token,
		srv:   &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)},
		done:  make(chan struct{}),
	}
	go func() {
		defer close(b.done)
		if err := b.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("mcp bridge stopped", "err", err)
		}
	}()
	return b, nil
}

// Close stops the bridge, ending its open streams.
func (b *Bridge) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := b.srv.Shutdown(ctx)
	if err != nil {
		err = b.srv.Close()
	}
	<-b.done
	return err
}

// RequireBearer passes only requests whose Authorization header carries
// token (constant-time compare); others get 401.
func RequireBearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := strings.TrimSpace(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="goai-mcp"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
