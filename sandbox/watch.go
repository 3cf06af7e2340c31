package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Watch defaults.
const (
	DefaultPollInterval = 700 * time.Millisecond
	DefaultCoalesce     = 50 * time.Millisecond
)

// DefaultIgnore is the default ignore list.
var DefaultIgnore = []string{".git", "node_modules"}

// WatchMode selects how WatchWorkspace observes the workspace.
type WatchMode int

const (
	WatchAuto   WatchMode = iota // native when the provider supports it, else poll
	WatchNative                  // native only (ErrUnsupported if unavailable)
	WatchPoll                    // the portable find poll
)

func (m WatchMode) String() string {
	switch m {
	case WatchNative:
		return "native"
	case WatchPoll:
		return "poll"
	}
	return "auto"
}

// WatchOptions configures WatchWorkspace.
type WatchOptions struct {
	// Root is the virtual directory watched; default /workspace.
	Root string
	// OnEvent receives every event, from one goroutine, in order.
	OnEvent func(WatchEvent)
	Mode    WatchMode
	// Interval is the poll interval; default 700 ms.
	Interval time.Duration
	// Coalesce is the native coalescing window: all raw events for one
	// path within the window after the first become one event. Zero means
	// DefaultCoalesce (50 ms); a negative value turns coalescing off.
	Coalesce time.Duration
	// Ignore lists names skipped at any depth; nil means DefaultIgnore.
	Ignore []string
	Logger *slog.Logger
}

// Watcher is a running workspace watcher.
type Watcher struct {
	mode     WatchMode
	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
	stopErr  error
	sweep    atomic.Bool // Drain: reconcile with the workspace before exiting
	syncs    chan chan struct{}
}

// DrainTimeout bounds the final reconciliation of [Watcher.Drain].
const DrainTimeout = 30 * time.Second

// Mode is the effective mode: WatchNative or WatchPoll (WatchAuto for a
// watcher that never started because its context was already done).
func (w *Watcher) Mode() WatchMode { return w.mode }

// Stop stops the watcher and waits for it: OnEvent is not called after Stop
// returns. Events still being coalesced are delivered first. It is
// idempotent and returns the native subscription's stop error, if any.
// Cancelling the context passed to WatchWorkspace stops the watcher too
// (Stop then only waits).
func (w *Watcher) Stop() error {
	w.stopOnce.Do(func() {
		if w.cancel == nil {
			return
		}
		w.cancel()
		<-w.done
	})
	return w.stopErr
}

// Drain stops the watcher like Stop, but first reconciles with the
// workspace, so every change made before Drain was called is reported,
// including one the native watch has not delivered yet or the poll has not
// seen: the native path rescans the tree against what it has reported, the
// poll path polls once more. OnEvent is not called after Drain returns.
// If the watcher had already stopped (Stop, or its context was cancelled),
// Drain only waits, like Stop.
func (w *Watcher) Drain() error {
	w.sweep.Store(true)
	return w.Stop()
}

// Sync reconciles with the workspace while the watcher keeps running: it
// returns once OnEvent has been called for every change made before Sync
// was called (the native path delivers what it is coalescing and rescans,
// the poll path polls at once). It returns at once when the watcher has
// stopped, and ctx's error when ctx ends first.
func (w *Watcher) Sync(ctx context.Context) error {
	if w.syncs == nil {
		return nil
	}
	reply := make(chan struct{})
	select {
	case w.syncs <- reply:
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-reply:
		return nil
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sweepContext is the context of the final reconciliation: the watcher's
// own context is cancelled by then.
func sweepContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), DrainTimeout)
}

// WatchWorkspace watches the workspace of h and calls opts.OnEvent for each
// file created, changed or deleted. It uses the provider's native watcher
// when there is one and otherwise polls with `find`. The initial seed (or
// poll) runs before it returns; cancelling ctx stops the watcher. Setup
// never fails because of the workspace: a failed seed is retried.
func WatchWorkspace(ctx context.Context, h Handle, opts WatchOptions) (*Watcher, error) {
	if opts.OnEvent == nil {
		return nil, errors.New("sandbox: WatchOptions.OnEvent is required")
	}
	if opts.Root == "" {
		opts.Root = DefaultRoot
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultPollInterval
	}
	if opts.Coalesce == 0 {
		opts.Coalesce = DefaultCoalesce
	}
	if opts.Ignore == nil {
		opts.Ignore = DefaultIgnore
	}
	opts.Logger = orDiscard(opts.Logger)
	if ctx.Err() != nil {
		return &Watcher{mode: WatchAuto}, nil
	}
	nw, hasNative := h.FS().(NativeWatcher)
	hasNative = hasNative && h.Capabilities().NativeWatch
	if opts.Mode == WatchNative && !hasNative {
		return nil, &UnsupportedCapabilityError{Provider: h.Provider(), Capability: "watch"}
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &Watcher{cancel: cancel, done: make(chan struct{}), syncs: make(chan chan struct{})}
	if opts.Mode != WatchPoll && hasNative {
		n := newNativeWatch(h, opts)
		n.syncs = w.syncs
		sub, err := nw.Watch(wctx, opts.Root, NativeWatchOptions{Ignore: opts.Ignore}, n.push(wctx))
		if err == nil {
			w.mode = WatchNative
			n.seed(wctx)
			go func() {
				defer close(w.done)
				n.loop(wctx)
				if w.sweep.Load() {
					sctx, cancel := sweepContext(ctx)
					n.finalSweep(sctx)
					cancel()
				}
				// Stopped by Stop or by ctx: release the native watch.
				if err := sub.Stop(); err != nil {
					w.stopErr = err
					logWarn(opts.Logger, "sandbox watch: native subscription.stop() failed", "root", opts.Root, "error", err)
				}
			}()
			return w, nil
		}
		if opts.Mode == WatchNative {
			cancel()
			return nil, fmt.Errorf("sandbox: native watch: %w", err)
		}
		logWarn(opts.Logger, "sandbox watch: native watch failed, falling back to polling", "root", opts.Root, "error", err)
	}
	w.mode = WatchPoll
	p := newPollWatch(h, opts)
	p.syncs = w.syncs
	p.seed(wctx)
	go func() {
		defer close(w.done)
		p.loop(wctx)
		if w.sweep.Load() {
			sctx, cancel := sweepContext(ctx)
			p.tick(sctx)
			cancel()
		}
	}()
	return w, nil
}

// ---- poll path ----

// FindCommand is the poll command for an ignore list.
func FindCommand(ignore []string) string {
	var b strings.Builder
	b.WriteString("find . -type f")
	for _, ig := range ignore {
		b.WriteString(" -not -path " + Quote("*/"+ig+"/*"))
	}
	b.WriteString(` -printf '%T@\t%s\t%p\n'`)
	return b.String()
}

type pollWatch struct {
	h            Handle
	opts         WatchOptions
	cmd          string
	prev         *FileSnapshot // nil until a baseline exists
	prevRaw      string        // the find output prev was parsed from, if complete
	seedComplete bool
	throws       int
	syncs        chan chan struct{} // Watcher.Sync requests
}

func newPollWatch(h Handle, opts WatchOptions) *pollWatch {
	return &pollWatch{h: h, opts: opts, cmd: FindCommand(opts.Ignore)}
}

// poll runs find once. ok is false for a null poll. raw is the output of
// a complete poll; when it equals the previous complete output the
// snapshot is not parsed (snap is nil) since nothing changed.
func (p *pollWatch) poll(ctx context.Context, initial bool) (snap *FileSnapshot, raw string, complete, ok bool) {
	log := p.opts.Logger
	res, err := p.h.Exec(ctx, p.cmd, ExecOptions{Dir: p.opts.Root, MaxOutputBytes: UnlimitedOutput})
	if err != nil {
		switch {
		case ctx.Err() != nil:
			logDebug(log, "sandbox watch: `find` poll threw during teardown", "root", p.opts.Root, "error", err)
		case initial:
			logWarn(log, "sandbox watch: initial `find` poll threw", "root", p.opts.Root, "error", err)
		default:
			p.throws++
			if p.throws >= 3 {
				logWarn(log, "sandbox watch: `find` poll threw repeatedly", "root", p.opts.Root, "consecutiveThrows", p.throws, "error", err)
			} else {
				logDebug(log, "sandbox watch: `find` poll threw", "root", p.opts.Root, "error", err)
			}
		}
		return nil, "", false, false
	}
	p.throws = 0
	if res.ExitCode == 0 {
		if p.prev != nil && p.prevRaw != "" && res.Stdout == p.prevRaw {
			return nil, res.Stdout, true, true
		}
		return ParseFindOutput(res.Stdout), res.Stdout, true, true
	}
	if res.Stdout == "" {
		logWarn(log, "sandbox watch: `find` poll exited non-zero with no output", "root", p.opts.Root, "exitCode", res.ExitCode, "stderr", res.Stderr)
		return nil, "", false, false
	}
	logDebug(log, "sandbox watch: `find` non-zero exit with partial output", "root", p.opts.Root, "exitCode", res.ExitCode, "stderr", res.Stderr)
	return ParseFindOutput(res.Stdout), "", false, true
}

func (p *pollWatch) seed(ctx context.Context) {
	snap, raw, complete, ok := p.poll(ctx, true)
	if ok {
		p.prev, p.prevRaw, p.seedComplete = snap, raw, complete
	}
}

func (p *pollWatch) tick(ctx context.Context) {
	snap, raw, complete, ok := p.poll(ctx, false)
	if !ok || ctx.Err() != nil {
		return
	}
	if snap == nil { // byte-identical to the previous complete poll
		return
	}
	if p.prev == nil {
		p.prev, p.prevRaw, p.seedComplete = snap, raw, complete
		return
	}
	if !p.seedComplete && complete {
		logDebug(p.opts.Logger, "sandbox watch: re-baselined after provisional partial seed", "root", p.opts.Root)
		p.prev, p.prevRaw, p.seedComplete = snap, raw, true
		return
	}
	next := snap
	if !complete {
		next = p.prev.merge(snap)
	}
	evs := DiffSnapshots(p.opts.Root, p.prev, next, time.Now())
	p.prev, p.prevRaw = next, raw
	for _, ev := range evs {
		p.opts.OnEvent(ev)
	}
}

func (p *pollWatch) loop(ctx context.Context) {
	t := time.NewTicker(p.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.tick(ctx)
		case reply := <-p.syncs:
			p.tick(ctx)
			close(reply)
		}
	}
}

// ---- native path ----

type nativeWatch struct {
	h      Handle
	opts   WatchOptions
	lst    Lstater
	ignore map[string]bool
	raw    chan RawEvent
	known  map[string]string // rel path -> signature
	seeded bool
	poll   *pollWatch // set once the watch fell back to polling
	syncs  chan chan struct{}
	// swept holds the signatures a Sync reported ahead of their raw
	// events; the raw event that follows for the same state is not
	// reported twice.
	swept map[string]string
}

func newNativeWatch(h Handle, opts WatchOptions) *nativeWatch {
	n := &nativeWatch{h: h, opts: opts, raw: make(chan RawEvent, 4096), known: map[string]string{}, ignore: map[string]bool{}}
	n.lst, _ = h.FS().(Lstater)
	for _, ig := range opts.Ignore {
		n.ignore[ig] = true
	}
	return n
}

func (n *nativeWatch) push(ctx context.Context) func(RawEvent) {
	return func(ev RawEvent) {
		select {
		case n.raw <- ev:
		case <-ctx.Done():
		}
	}
}

func (n *nativeWatch) ignored(rel string) bool {
	for seg := range strings.SplitSeq(rel, "/") {
		if n.ignore[seg] {
			return true
		}
	}
	return false
}

// scan walks the tree and returns rel path -> signature, and whether the
// root itself could be listed.
func (n *nativeWatch) scan(ctx context.Context) (*FileSnapshot, bool) {
	snap := NewFileSnapshot(256)
	rootOK := true
	var walk func(dir string, isRoot bool)
	walk = func(dir string, isRoot bool) {
		ents, err := n.h.FS().ReadDir(ctx, dir)
		if err != nil {
			if isRoot {
				rootOK = false
			}
			logWarn(n.opts.Logger, "sandbox watch: failed to list directory while seeding", "dir", dir, "error", err)
			return
		}
		for _, e := range ents {
			if n.ignore[e.Name] {
				continue
			}
			p := dir + "/" + e.Name
			if e.Type == EntryDir {
				walk(p, false)
				continue
			}
			sig := ""
			if n.lst != nil {
				if fi, err := n.lst.Lstat(ctx, p); err == nil && fi != nil {
					sig = signature(fi)
				}
			}
			snap.Set(relPath(n.opts.Root, p), sig)
		}
	}
	walk(strings.TrimRight(n.opts.Root, "/"), true)
	return snap, rootOK
}

func signature(fi *FileInfo) string {
	return strconv.FormatInt(fi.ModTime.UnixNano(), 10) + "\t" + strconv.FormatInt(fi.Size, 10)
}

func (n *nativeWatch) seed(ctx context.Context) {
	snap, ok := n.scan(ctx)
	for _, e := range snap.entries {
		n.known[e.path] = e.sig
	}
	n.seeded = ok
}

type pendingPath struct {
	path string
	due  time.Time
}

func (n *nativeWatch) loop(ctx context.Context) {
	pending := map[string]bool{}
	var queue []pendingPath
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	flush := func(ctx context.Context, all bool) {
		now := time.Now()
		for len(queue) > 0 && (all || !queue[0].due.After(now)) {
			p := queue[0].path
			queue = queue[1:]
			delete(pending, p)
			n.classify(ctx, p)
		}
		if len(queue) > 0 {
			timer.Reset(time.Until(queue[0].due))
		}
	}
	defer func() {
		// Deliver what is still being coalesced: never lose an event.
		flush(context.WithoutCancel(ctx), true)
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			flush(ctx, false)
		case reply := <-n.syncs:
			// Pending coalesced paths first, then a reconciliation for
			// what inotify has not delivered yet.
			flush(ctx, true)
			n.syncSweep(ctx)
			close(reply)
		case ev := <-n.raw:
			switch ev.Op {
			case RawOverflow:
				flush(ctx, true)
				n.rescan(ctx)
				continue
			case RawFailed:
				flush(ctx, true)
				logWarn(n.opts.Logger, "sandbox watch: native watch failed, falling back to polling", "root", n.opts.Root, "error", ev.Err)
				n.fallbackToPoll(ctx)
				return
			}
			rel := relPath(n.opts.Root, ev.Path)
			if ev.Path == "" || n.ignored(rel) {
				continue
			}
			if n.opts.Coalesce < 0 {
				n.classify(ctx, ev.Path)
				continue
			}
			if pending[ev.Path] {
				continue
			}
			pending[ev.Path] = true
			queue = append(queue, pendingPath{path: ev.Path, due: time.Now().Add(n.opts.Coalesce)})
			if len(queue) == 1 {
				timer.Reset(n.opts.Coalesce)
			}
		}
	}
}

func (n *nativeWatch) emit(t FileEventType, rel string, ts time.Time) {
	n.opts.OnEvent(WatchEvent{Type: t, Path: joinRoot(n.opts.Root, rel), Timestamp: ts})
}

func (n *nativeWatch) classify(ctx context.Context, path string) {
	if !n.seeded {
		n.seed(ctx)
		if n.seeded {
			logDebug(n.opts.Logger, "sandbox watch: re-seeded after failed initial seed", "root", n.opts.Root)
		}
	}
	rel := relPath(n.opts.Root, path)
	var (
		exists bool
		isDir  bool
		sig    string
	)
	if n.lst != nil {
		fi, err := n.lst.Lstat(ctx, path)
		if err != nil {
			logWarn(n.opts.Logger, "sandbox watch: native event classify failed", "path", path, "error", err)
			return
		}
		if fi != nil {
			exists, isDir, sig = true, fi.Type == EntryDir, signature(fi)
		}
	} else {
		ok, err := n.h.FS().Exists(ctx, path)
		if err != nil {
			logWarn(n.opts.Logger, "sandbox watch: native event classify failed", "path", path, "error", err)
			return
		}
		exists = ok
	}
	if want, ok := n.swept[rel]; ok {
		delete(n.swept, rel)
		if (!exists && want == "") || (exists && !isDir && want == sig) {
			return // already reported by a Sync
		}
	}
	ts := time.Now()
	if !exists || isDir {
		if _, ok := n.known[rel]; ok {
			delete(n.known, rel)
			n.emit(FileDelete, rel, ts)
		}
		if !exists { // a directory moved or removed: its files are gone too
			var gone []string
			prefix := rel + "/"
			for k := range n.known {
				if strings.HasPrefix(k, prefix) {
					gone = append(gone, k)
				}
			}
			slices.Sort(gone)
			for _, k := range gone {
				delete(n.known, k)
				n.emit(FileDelete, k, ts)
			}
		}
		return
	}
	if _, ok := n.known[rel]; ok {
		n.known[rel] = sig
		n.emit(FileChange, rel, ts)
		return
	}
	n.known[rel] = sig
	n.emit(FileCreate, rel, ts)
}

// rescan answers a queue overflow: it walks the tree and reports every
// difference from what is known.
func (n *nativeWatch) rescan(ctx context.Context) {
	evs, ok := n.reconcile(ctx)
	if !ok {
		logWarn(n.opts.Logger, "sandbox watch: rescan after overflow could not list the root", "root", n.opts.Root)
		return
	}
	logDebug(n.opts.Logger, "sandbox watch: rescanned after native queue overflow", "root", n.opts.Root, "events", len(evs))
	for _, ev := range evs {
		n.opts.OnEvent(ev)
	}
}

// syncSweep is Sync's reconciliation on the running watch.
func (n *nativeWatch) syncSweep(ctx context.Context) {
	if n.poll != nil || !n.seeded {
		n.finalSweep(ctx)
		return
	}
	evs, ok := n.reconcile(ctx)
	if !ok {
		logWarn(n.opts.Logger, "sandbox watch: sync could not list the root", "root", n.opts.Root)
		return
	}
	if n.swept == nil {
		n.swept = map[string]string{}
	}
	for _, ev := range evs {
		rel := relPath(n.opts.Root, ev.Path)
		n.swept[rel] = n.known[rel] // "" for a delete
		n.opts.OnEvent(ev)
	}
}

// finalSweep is Drain's reconciliation: raw events not yet consumed are
// dropped and the tree is compared with what was reported instead.
func (n *nativeWatch) finalSweep(ctx context.Context) {
	if n.poll != nil {
		n.poll.tick(ctx)
		return
	}
	if !n.seeded {
		return // nothing to compare with: a sweep would report phantom creates
	}
	evs, ok := n.reconcile(ctx)
	if !ok {
		logWarn(n.opts.Logger, "sandbox watch: final sweep could not list the root", "root", n.opts.Root)
		return
	}
	logDebug(n.opts.Logger, "sandbox watch: final sweep", "root", n.opts.Root, "events", len(evs))
	for _, ev := range evs {
		n.opts.OnEvent(ev)
	}
}

// reconcile walks the tree, makes it the known state and returns every
// difference from the previous known state; ok is false (and nothing
// changes) when the root cannot be listed.
func (n *nativeWatch) reconcile(ctx context.Context) (evs []WatchEvent, ok bool) {
	next, ok := n.scan(ctx)
	if !ok {
		return nil, false
	}
	prev := NewFileSnapshot(len(n.known))
	for _, k := range slices.Sorted(maps.Keys(n.known)) {
		prev.Set(k, n.known[k])
	}
	evs = DiffSnapshots(n.opts.Root, prev, next, time.Now())
	clear(n.known)
	for _, e := range next.entries {
		n.known[e.path] = e.sig
	}
	return evs, true
}

func (n *nativeWatch) fallbackToPoll(ctx context.Context) {
	p := newPollWatch(n.h, n.opts)
	p.syncs = n.syncs
	n.poll = p
	p.seed(ctx)
	if p.prev != nil {
		// Report what changed between the native view and the first poll
		// by comparing path sets (signatures differ between the two).
		prev := NewFileSnapshot(len(n.known))
		for _, k := range slices.Sorted(maps.Keys(n.known)) {
			prev.Set(k, "")
		}
		cur := NewFileSnapshot(p.prev.Len())
		for _, e := range p.prev.entries {
			cur.Set(e.path, "")
		}
		for _, ev := range DiffSnapshots(n.opts.Root, prev, cur, time.Now()) {
			n.opts.OnEvent(ev)
		}
	}
	p.loop(ctx)
}
