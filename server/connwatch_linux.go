//go:build linux

package server

import (
	"errors"
	"net"
	"sync"
	"syscall"
)

// connWatch notices clients leaving taken-over connections. On Linux one
// goroutine waits on an epoll set of every watched socket for the peer's
// hang-up (EPOLLRDHUP, EPOLLHUP, EPOLLERR); it runs only while something is
// watched. A socket is in Go's own poller too, which is allowed: the set
// here asks only for hang-ups and never reads. Connections without a file
// descriptor get a reader goroutine each (watchByReading).
//
// Registrations are keyed by a number of the watch's own, never by the
// descriptor, so a hang-up reported for a socket already unwatched (whose
// descriptor may since be reused) wakes nobody.
type connWatch struct {
	mu      sync.Mutex
	epfd    int // -1 or 0 when stopped: see running
	pipe    [2]int
	running bool
	next    uint64
	watched map[uint64]watchedConn
	loop    sync.WaitGroup
}

type watchedConn struct {
	rc   syscall.RawConn
	gone func()
}

// wakeKey is the registration of the watch's own pipe.
const wakeKey = 0

// watch calls gone once when conn's peer hangs up, until unwatch is called,
// which returns what the client sent meanwhile (the epoll set reads
// nothing: nil).
func (cw *connWatch) watch(conn net.Conn, gone func()) (unwatch func() (sent []byte)) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return watchByReading(conn, gone)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return watchByReading(conn, gone)
	}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if !cw.running {
		if err := cw.start(); err != nil {
			return watchByReading(conn, gone)
		}
	}
	cw.next++
	key := cw.next
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLHUP | syscall.EPOLLERR, Fd: int32(key), Pad: int32(key >> 32)}
	ctlErr := errors.New("no descriptor")
	_ = rc.Control(func(fd uintptr) { ctlErr = syscall.EpollCtl(cw.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev) })
	if ctlErr != nil {
		cw.stopIfIdle()
		return watchByReading(conn, gone)
	}
	cw.watched[key] = watchedConn{rc: rc, gone: gone}
	return func() []byte {
		cw.unwatch(key)
		return nil
	}
}

// start creates the epoll set and its goroutine; cw.mu is held.
func (cw *connWatch) start() error {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		return err
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: wakeKey}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p[0], &ev); err != nil {
		syscall.Close(epfd)
		syscall.Close(p[0])
		syscall.Close(p[1])
		return err
	}
	cw.epfd, cw.pipe, cw.running = epfd, p, true
	if cw.watched == nil {
		cw.watched = map[uint64]watchedConn{}
	}
	cw.loop.Add(1)
	go cw.wait(epfd, p[0])
	return nil
}

// unwatch drops key's registration.
func (cw *connWatch) unwatch(key uint64) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	wc, ok := cw.watched[key]
	if !ok {
		return
	}
	delete(cw.watched, key)
	_ = wc.rc.Control(func(fd uintptr) { _ = syscall.EpollCtl(cw.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil) })
	cw.stopIfIdle()
}

// stopIfIdle wakes the goroutine to end when nothing is watched; cw.mu is
// held.
func (cw *connWatch) stopIfIdle() {
	if len(cw.watched) == 0 && cw.running {
		cw.running = false
		_, _ = syscall.Write(cw.pipe[1], []byte{1})
		syscall.Close(cw.pipe[1])
	}
}

// wait is the watch's goroutine: it ends, closing the set, once stopped.
func (cw *connWatch) wait(epfd, wake int) {
	defer cw.loop.Done()
	defer func() {
		syscall.Close(wake)
		syscall.Close(epfd)
	}()
	var events [64]syscall.EpollEvent
	var gone []func()
	for {
		n, err := syscall.EpollWait(epfd, events[:], -1)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return
		}
		stop := false
		cw.mu.Lock()
		for _, ev := range events[:n] {
			key := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if key == wakeKey {
				stop = true
				continue
			}
			wc, ok := cw.watched[key]
			if !ok {
				continue
			}
			delete(cw.watched, key)
			_ = wc.rc.Control(func(fd uintptr) { _ = syscall.EpollCtl(epfd, syscall.EPOLL_CTL_DEL, int(fd), nil) })
			gone = append(gone, wc.gone)
		}
		if !stop {
			cw.stopIfIdle()
		}
		cw.mu.Unlock()
		for i, f := range gone {
			f()
			gone[i] = nil
		}
		gone = gone[:0]
		if stop {
			return
		}
	}
}
