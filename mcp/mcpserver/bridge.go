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

// HTTPServer is an MCP server on Streamable HTTP that answers only requests
// carrying its bearer token.
type HTTPServer struct {
	// URL is the endpoint: http://<host>:<port>/mcp.
	URL   string
	token string
	mcp   *mcp.Server
	srv   *http.Server
	done  chan struct{}
}

// Token is the bearer token. Write it to a file the agent reads (never to
// argv or a log); String and LogValue leave it out.
func (b *HTTPServer) Token() string { return b.token }

func (b *HTTPServer) String() string { return "mcp server " + b.URL }

// LogValue keeps the token out of structured logs.
func (b *HTTPServer) LogValue() slog.Value { return slog.StringValue(b.String()) }

// StartBridge serves specs as the MCP server "tanstack" on port 0 of
// loopback (every interface with Remote) behind a fresh token.
func StartBridge(specs []chat.ToolSpec, opts BridgeOptions) (*HTTPServer, error) {
	srv, err := NewFromSpecs(specs, Options{Name: BridgeServerName, Version: "1.0.0", Call: opts.Call, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:0"
	if opts.Remote {
		addr = "0.0.0.0:0"
	}
	return Listen(srv, ListenOptions{Addr: addr, HostForSandbox: opts.HostForSandbox, Logger: opts.Logger})
}

// ListenOptions configure Listen.
type ListenOptions struct {
	// Addr is the listen address, "127.0.0.1:0" by default.
	Addr string
	// Token is the bearer token; empty means 24 random bytes in hex.
	Token string
	// HostForSandbox is the host put in URL; the listener's own host by
	// default (127.0.0.1 for an unspecified address).
	HostForSandbox string
	Logger         *slog.Logger
}

// Listen serves srv over Streamable HTTP at /mcp. The token is compared in
// constant time; a request without it gets 401. Close stops it.
func Listen(srv *mcp.Server, opts ListenOptions) (*HTTPServer, error) {
	token := opts.Token
	if token == "" {
		var raw [24]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return nil, fmt.Errorf("mcpserver: token: %w", err)
		}
		token = hex.EncodeToString(raw[:])
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: listen: %w", err)
	}
	tcp := ln.Addr().(*net.TCPAddr)
	host := opts.HostForSandbox
	if host == "" {
		host = tcp.IP.String()
		if tcp.IP.IsUnspecified() {
			host = "127.0.0.1"
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Logger: log,
		// Off loopback the token is the protection: a sandbox calls with
		// its own Host header (host.docker.internal).
		DisableLocalhostProtection: !tcp.IP.IsLoopback(),
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", RequireBearer(token, h))
	b := &HTTPServer{
		URL:   "http://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port)) + "/mcp",
		token: token,
		mcp:   srv,
		srv:   &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)},
		done:  make(chan struct{}),
	}
	go func() {
		defer close(b.done)
		if err := b.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("mcp server stopped", "err", err)
		}
	}()
	return b, nil
}

// Close stops the server, ending its open streams.
func (b *HTTPServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := b.srv.Shutdown(ctx)
	if err != nil {
		err = b.srv.Close()
	}
	<-b.done
	// Sessions whose client never said goodbye would live on.
	for ss := range b.mcp.Sessions() {
		_ = ss.Close()
	}
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
