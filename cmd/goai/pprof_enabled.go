//go:build pprof

package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // registers the profiling handlers on the default mux
	"os"
)

// A binary built with -tags pprof serves net/http/pprof on the loopback
// address in GOAI_PPROF (for example 127.0.0.1:6060), for profiling the
// serve path under bench/load (see bench/README.md). Release builds never
// include it.
func init() {
	addr := os.Getenv("GOAI_PPROF")
	if addr == "" {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(os.Stderr, "goai: GOAI_PPROF %q: only a loopback address is allowed\n", addr)
		os.Exit(2)
	}
	go func() { _ = http.ListenAndServe(addr, nil) }()
}
