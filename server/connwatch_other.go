//go:build !linux

package server

import (
	"net"
	"sync"
)

// connWatch notices clients leaving taken-over connections: elsewhere than
// on Linux, with a reader goroutine per connection (watchByReading).
type connWatch struct {
	loop sync.WaitGroup // no goroutine of its own: for connStreams.close
}

// watch calls gone once when conn's peer hangs up, until unwatch is called,
// which returns what the client sent meanwhile.
func (cw *connWatch) watch(conn net.Conn, gone func()) (unwatch func() (sent []byte)) {
	return watchByReading(conn, gone)
}
