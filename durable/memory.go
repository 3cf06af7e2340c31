package durable

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"
)

// Defaults shared by the backends.
const (
	// DefaultFirstChunkDeadline bounds how long a sentinel read of a run
	// with no data waits for its first entry.
	DefaultFirstChunkDeadline = 100 * time.Millisecond
	// DefaultRetention is how long Memory keeps a closed log.
	DefaultRetention = 5 * time.Minute
	// DefaultMaxLogs is how many logs Memory keeps before evicting the
	// oldest closed ones.
	DefaultMaxLogs = 1024
)

const memoryScheme = "memory"

// MemoryOptions configure a Memory. The zero value means the defaults.
type MemoryOptions struct {
	// FirstChunkDeadline bounds a sentinel read's wait for the first entry
	// of a run with no data. Zero means DefaultFirstChunkDeadline; negative
	// means wait until ctx is done.
	FirstChunkDeadline time.Duration
	// Retention is how long a closed log is kept. Zero means
	// DefaultRetention; negative means forever.
	Retention time.Duration
	// MaxLogs is how many logs are kept before the oldest closed ones are
	// evicted. Zero means DefaultMaxLogs; negative means no limit. Open logs
	// are never evicted.
	MaxLogs int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Memory is an in-process Store (memoryStream and InMemoryRunStore upstream):
// exactly-once within the process, gone with it. Closed logs are evicted on
// the creation of a new log after Retention, or oldest first beyond MaxLogs.
// Its offsets are FormatOffset's for the scheme "memory".
type Memory struct {
	opts MemoryOptions

	mu   sync.Mutex
	logs map[string]*memLog
	// closedLogs are the closed logs in the order they closed, the next
	// to evict first, so that a new log evicts without looking at every
	// log; an entry whose log was pruned (or replaced) is skipped.
	closedLogs []closedLog
	runs       map[string]*memRun
	// threadRuns are each thread's runs in creation order, so that a
	// thread's questions do not look at every run.
	threadRuns map[string][]*memRun
	threads    map[string]Thread
	// requests are the stored requests of runs (RequestStore).
	requests map[string][]byte
	nextRun  int64
}

type closedLog struct {
	id string
	l  *memLog
}

type memLog struct {
	entries   [][]byte
	closed    bool
	closedAt  time.Time
	changed   chan struct{} // made by a reader about to wait, closed by the next change
	producers map[Producer]memSpan
}

type memSpan struct{ first, n int64 }

type memRun struct {
	rec       RunRecord
	order     int64
	heartbeat time.Time // zero: never
}

var _ interface {
	Store
	BatchReader
	QueuedAppender
	Upserter
	Pruner
	Leaser
	ThreadStore
	RequestStore
} = (*Memory)(nil)

// NewMemory returns an empty Memory. opts may be nil.
func NewMemory(opts *MemoryOptions) *Memory {
	m := &Memory{logs: make(map[string]*memLog), runs: make(map[string]*memRun), threadRuns: make(map[string][]*memRun)}
	if opts != nil {
		m.opts = *opts
	}
	if m.opts.FirstChunkDeadline == 0 {
		m.opts.FirstChunkDeadline = DefaultFirstChunkDeadline
	}
	if m.opts.Retention == 0 {
		m.opts.Retention = DefaultRetention
	}
	if m.opts.MaxLogs == 0 {
		m.opts.MaxLogs = DefaultMaxLogs
	}
	if m.opts.Now == nil {
		m.opts.Now = time.Now
	}
	return m
}

// notify wakes the readers waiting for a change of l. An append nobody
// waits for (its readers are busy with the entries before it) costs no
// channel.
func (l *memLog) notify() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// wait returns the channel the next change of l closes.
func (l *memLog) wait() <-chan struct{} {
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// logLocked returns runID's log, creating it (and evicting old closed logs)
// if create is set.
func (m *Memory) logLocked(runID string, create bool) *memLog {
	l := m.logs[runID]
	if l != nil || !create {
		return l
	}
	m.evictLocked()
	l = &memLog{}
	m.logs[runID] = l
	return l
}

// evictLocked evicts closed logs, oldest first, while they are past
// Retention or there are MaxLogs logs.
func (m *Memory) evictLocked() {
	expired := m.opts.Now().Add(-m.opts.Retention)
	for len(m.closedLogs) > 0 {
		c := m.closedLogs[0]
		if m.logs[c.id] == c.l {
			old := m.opts.Retention > 0 && !c.l.closedAt.After(expired)
			full := m.opts.MaxLogs > 0 && len(m.logs) >= m.opts.MaxLogs
			if !old && !full {
				return
			}
			delete(m.logs, c.id)
		}
		m.closedLogs[0] = closedLog{} // the array keeps no evicted log alive
		m.closedLogs = m.closedLogs[1:]
	}
}

// Append implements Log.
func (m *Memory) Append(ctx context.Context, runID string, batch [][]byte) ([]string, error) {
	return m.AppendWith(ctx, runID, batch, AppendOptions{})
}

// AppendWith implements Log.
func (m *Memory) AppendWith(ctx context.Context, runID string, batch [][]byte, opts AppendOptions) ([]string, error) {
	if err := CheckRunID(runID); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(batch) == 0 {
		return []string{}, nil
	}
	sp, err := m.appendBatch(runID, batch, false, opts)
	if err != nil {
		return nil, err
	}
	return m.offsets(runID, sp.first, sp.n), nil
}

// AppendQueued implements QueuedAppender. An append to memory never waits,
// so it runs at once on the caller's goroutine, take and done included:
// a producer appending a token at a time then hands its reader the entry
// with no goroutine in between (docs/durable.md §1.5).
func (m *Memory) AppendQueued(runID string, opts AppendOptions, take func() [][]byte, done func(err error) (again bool)) {
	if err := CheckRunID(runID); err != nil {
		done(err)
		return
	}
	for {
		var err error
		if batch := take(); len(batch) > 0 {
			_, err = m.appendBatch(runID, batch, true, opts) // the entries are handed over
		}
		if !done(err) || err != nil {
			return
		}
	}
}

// appendBatch stores a non-empty batch and returns its span. owned says
// the entries were handed over (QueuedAppender): they are kept uncopied.
func (m *Memory) appendBatch(runID string, batch [][]byte, owned bool, opts AppendOptions) (memSpan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logs[runID]
	if opts.Producer.ID != "" && l != nil {
		if sp, ok := l.producers[opts.Producer]; ok {
			if sp.n != int64(len(batch)) {
				return memSpan{}, fmt.Errorf("%w: run %q producer %q seq %d", ErrProducerConflict, runID, opts.Producer.ID, opts.Producer.Seq)
			}
			return sp, nil
		}
	}
	if opts.Epoch > 0 {
		var observed int64
		if r := m.runs[runID]; r != nil && r.rec.DriverEpoch != nil {
			observed = *r.rec.DriverEpoch
		}
		if observed != opts.Epoch {
			return memSpan{}, &ClaimLostError{RunID: runID, Held: opts.Epoch, Observed: observed}
		}
	}
	if l != nil && l.closed {
		return memSpan{}, fmt.Errorf("%w: run %q", ErrLogClosed, runID)
	}
	l = m.logLocked(runID, true)
	first := int64(len(l.entries)) + 1
	for _, b := range batch {
		if !owned {
			b = bytes.Clone(b)
		}
		l.entries = append(l.entries, b)
	}
	if opts.Producer.ID != "" {
		if l.producers == nil {
			l.producers = make(map[Producer]memSpan)
		}
		l.producers[opts.Producer] = memSpan{first, int64(len(batch))}
	}
	l.notify()
	return memSpan{first, int64(len(batch))}, nil
}

func (m *Memory) offsets(runID string, first, n int64) []string {
	return FormatOffsets(memoryScheme, runID, first, n)
}

// Close implements Log.
func (m *Memory) Close(ctx context.Context, runID string) error {
	if err := CheckRunID(runID); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logLocked(runID, true)
	if !l.closed {
		l.closed = true
		l.closedAt = m.opts.Now()
		l.notify()
		m.closedLogs = append(m.closedLogs, closedLog{runID, l})
	}
	return nil
}

// Snapshot implements Log.
func (m *Memory) Snapshot(ctx context.Context, runID string) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logs[runID]
	if l == nil {
		return []Entry{}, nil
	}
	mint := NewOffsetMinter(memoryScheme, runID)
	out := make([]Entry, len(l.entries))
	for i, b := range l.entries {
		out[i] = Entry{Offset: mint.Offset(int64(i) + 1), Data: bytes.Clone(b)}
	}
	return out, nil
}

// Read implements Log.
func (m *Memory) Read(ctx context.Context, runID, after string) iter.Seq2[Entry, error] {
	return Entries(ctx, m.ReadBatches(ctx, runID, after))
}

// ReadBatches implements BatchReader.
func (m *Memory) ReadBatches(ctx context.Context, runID, after string) iter.Seq2[[]Entry, error] {
	return func(yield func([]Entry, error) bool) {
		pos, err := m.start(ctx, runID, after)
		if err != nil {
			if err != errQuiet {
				yield(nil, err)
			}
			return
		}
		mint := NewOffsetMinter(memoryScheme, runID)
		var buf [][]byte
		var batch []Entry
		for {
			m.mu.Lock()
			l := m.logs[runID]
			if l == nil { // evicted under a reader: it was closed and fully stored
				m.mu.Unlock()
				yield(nil, fmt.Errorf("%w: run %q was evicted during the read", ErrRunNotFound, runID))
				return
			}
			buf = append(buf[:0], l.entries[min(pos, int64(len(l.entries))):]...)
			closed := l.closed
			var changed <-chan struct{}
			if len(buf) == 0 && !closed {
				changed = l.wait()
			}
			m.mu.Unlock()
			if len(buf) > 0 {
				if ctx.Err() != nil {
					return
				}
				batch = mint.AppendEntries(batch[:0], pos+1, buf)
				pos += int64(len(buf))
				if !yield(batch, nil) {
					return
				}
				clear(batch) // let the entries go while the read waits
				continue
			}
			if closed {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}
}

// errQuiet ends a read without an error (its context is done).
var errQuiet = fmt.Errorf("durable: read cancelled")

// start resolves after to the seq the read continues from.
func (m *Memory) start(ctx context.Context, runID, after string) (int64, error) {
	if err := CheckRunID(runID); err != nil {
		return 0, err
	}
	if after != FromStart && after != Now {
		seq, err := ParseOffset(memoryScheme, runID, after)
		if err != nil {
			return 0, err
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		l := m.logs[runID]
		if l == nil {
			return 0, fmt.Errorf("%w: run %q (unknown or expired)", ErrRunNotFound, runID)
		}
		if seq > int64(len(l.entries)) {
			return 0, FutureOffsetError(runID, after)
		}
		return seq, nil
	}
	var deadline <-chan time.Time
	if m.opts.FirstChunkDeadline > 0 {
		t := time.NewTimer(m.opts.FirstChunkDeadline)
		defer t.Stop()
		deadline = t.C
	}
	start := int64(-1)
	for {
		m.mu.Lock()
		l := m.logs[runID]
		if l == nil {
			// Park on a placeholder so that the first append wakes us.
			l = m.logLocked(runID, true)
			defer m.dropPlaceholder(runID, l)
		}
		if start < 0 {
			start = 0
			if after == Now {
				start = int64(len(l.entries))
			}
		}
		if len(l.entries) > 0 || l.closed {
			m.mu.Unlock()
			return start, nil
		}
		changed := l.wait()
		m.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			return 0, fmt.Errorf("%w: run %q produced no data within %v", ErrRunNotFound, runID, m.opts.FirstChunkDeadline)
		case <-ctx.Done():
			return 0, errQuiet
		}
	}
}

// dropPlaceholder removes a log a sentinel read created to park on, if
// nothing was ever stored in it.
func (m *Memory) dropPlaceholder(runID string, l *memLog) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.logs[runID] == l && len(l.entries) == 0 && !l.closed {
		delete(m.logs, runID)
	}
}

// Upsert implements Upserter.
func (m *Memory) Upsert(ctx context.Context, runID string, entries []Entry) ([]string, error) {
	if err := CheckRunID(runID); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logs[runID]
	var tail int64
	if l != nil {
		tail = int64(len(l.entries))
		if l.closed {
			return nil, fmt.Errorf("%w: run %q", ErrLogClosed, runID)
		}
	}
	seqs, err := PlanUpsert(memoryScheme, runID, tail, entries)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return []string{}, nil
	}
	l = m.logLocked(runID, true)
	for i, e := range entries {
		if seqs[i] <= int64(len(l.entries)) {
			l.entries[seqs[i]-1] = bytes.Clone(e.Data)
		} else {
			l.entries = append(l.entries, bytes.Clone(e.Data))
		}
	}
	l.notify()
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Offset
	}
	return out, nil
}

// Prune implements Pruner.
func (m *Memory) Prune(ctx context.Context, cutoff time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, l := range m.logs {
		if l.closed && !l.closedAt.After(cutoff) {
			delete(m.logs, id)
			n++
		}
	}
	m.closedLogs = slices.DeleteFunc(m.closedLogs, func(c closedLog) bool { return m.logs[c.id] != c.l })
	for id, r := range m.runs {
		if r.rec.Status.Terminal() && r.rec.FinishedAt != nil && !r.rec.FinishedAt.After(cutoff) {
			delete(m.runs, id)
			delete(m.requests, id)
			th := r.rec.ThreadID
			if rs := slices.DeleteFunc(m.threadRuns[th], func(o *memRun) bool { return o == r }); len(rs) > 0 {
				m.threadRuns[th] = rs
			} else {
				delete(m.threadRuns, th)
			}
		}
	}
	return n, nil
}

// CreateOrResume implements RunStore.
func (m *Memory) CreateOrResume(ctx context.Context, rec RunRecord) (RunRecord, error) {
	rec, err := CheckNewRun(rec)
	if err != nil {
		return RunRecord{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.create(rec).rec.Clone(), nil
}

// create records rec unless its run exists, and returns the run; m.mu is
// held.
func (m *Memory) create(rec RunRecord) *memRun {
	if r := m.runs[rec.RunID]; r != nil {
		return r
	}
	rec = normalizeRecord(rec)
	m.nextRun++
	r := &memRun{rec: rec, order: m.nextRun}
	m.runs[rec.RunID] = r
	m.threadRuns[rec.ThreadID] = append(m.threadRuns[rec.ThreadID], r)
	return r
}

// StartRun implements RunStarter.
func (m *Memory) StartRun(ctx context.Context, rec RunRecord) (RunRecord, Claim, bool, error) {
	rec, err := CheckNewRun(rec)
	if err != nil {
		return RunRecord{}, Claim{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.create(rec)
	if r.rec.Owner != rec.Owner || r.rec.Status != StatusRunning || (r.rec.CancelRequested != nil && *r.rec.CancelRequested) {
		return r.rec.Clone(), Claim{}, false, nil
	}
	var zero int64
	c, err := m.claimLocked(rec.RunID, &zero)
	return r.rec.Clone(), c, err == nil, nil
}

// normalizeRecord truncates a new record's times to milliseconds.
func normalizeRecord(rec RunRecord) RunRecord {
	rec = rec.Clone()
	rec.StartedAt = Millis(rec.StartedAt)
	if rec.FinishedAt != nil {
		rec.FinishedAt = Ptr(Millis(*rec.FinishedAt))
	}
	if rec.DetachedSince != nil {
		rec.DetachedSince = Ptr(Millis(*rec.DetachedSince))
	}
	return rec
}

// Get implements RunStore.
func (m *Memory) Get(ctx context.Context, runID string) (RunRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[runID]
	if r == nil {
		return RunRecord{}, fmt.Errorf("%w: %q", ErrRunNotFound, runID)
	}
	return r.rec.Clone(), nil
}

// CancelRequested implements CancelLister.
func (m *Memory) CancelRequested(ctx context.Context, runIDs []string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []string{}
	for _, id := range runIDs {
		if r := m.runs[id]; r != nil && r.rec.CancelRequested != nil && *r.rec.CancelRequested {
			out = append(out, id)
		}
	}
	return out, nil
}

// Update implements RunStore.
func (m *Memory) Update(ctx context.Context, runID string, patch RunPatch) error {
	if err := patch.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[runID]
	if r == nil {
		return nil
	}
	if err := patch.CheckEpoch(r.rec); err != nil {
		return err
	}
	patch.Apply(&r.rec)
	return nil
}

// sortedRuns returns the runs of from that keep admits, sorted by by.
func sortedRuns(from iter.Seq[*memRun], keep func(*memRun) bool, by func(a, b *memRun) int) []RunRecord {
	var rs []*memRun
	for r := range from {
		if keep(r) {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, by)
	out := make([]RunRecord, len(rs))
	for i, r := range rs {
		out[i] = r.rec.Clone()
	}
	return out
}

func byStart(a, b *memRun) int {
	return cmp.Or(a.rec.StartedAt.Compare(b.rec.StartedAt), cmp.Compare(a.order, b.order))
}

// FindActiveRun implements RunStore.
func (m *Memory) FindActiveRun(ctx context.Context, threadID string) (RunRecord, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := sortedRuns(slices.Values(m.threadRuns[threadID]), func(r *memRun) bool {
		return r.rec.Status == StatusRunning
	}, byStart)
	if len(rs) == 0 {
		return RunRecord{}, false, nil
	}
	return rs[len(rs)-1], true, nil
}

// ListByThread implements RunStore.
func (m *Memory) ListByThread(ctx context.Context, threadID string) ([]RunRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return sortedRuns(slices.Values(m.threadRuns[threadID]), func(*memRun) bool { return true }, byStart), nil
}

// ListReclaimable implements RunStore.
func (m *Memory) ListReclaimable(ctx context.Context, now time.Time, ttl time.Duration) ([]RunRecord, error) {
	cutoff := now.Add(-ttl).UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	return sortedRuns(maps.Values(m.runs), func(r *memRun) bool {
		return r.rec.Status == StatusRunning && r.rec.DetachedSince != nil && r.rec.DetachedSince.UnixMilli() <= cutoff
	}, func(a, b *memRun) int {
		return cmp.Or(a.rec.DetachedSince.Compare(*b.rec.DetachedSince), cmp.Compare(a.order, b.order))
	}), nil
}

// Claim implements RunStore.
func (m *Memory) Claim(ctx context.Context, runID string) (Claim, error) {
	return m.claim(runID, nil)
}

// ClaimIf implements Leaser.
func (m *Memory) ClaimIf(ctx context.Context, runID string, epoch int64) (Claim, error) {
	return m.claim(runID, &epoch)
}

// claim moves a live run's driver epoch one up. With ifEpoch (ClaimIf) the
// run must be at that epoch, and the claim is also its first heartbeat.
func (m *Memory) claim(runID string, ifEpoch *int64) (Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.claimLocked(runID, ifEpoch)
}

// claimLocked is claim with m.mu held.
func (m *Memory) claimLocked(runID string, ifEpoch *int64) (Claim, error) {
	r := m.runs[runID]
	if r == nil {
		return Claim{}, &ClaimError{RunID: runID, Reason: ClaimUnknown}
	}
	if r.rec.Status.Terminal() {
		return Claim{}, &ClaimError{RunID: runID, Reason: ClaimTerminal}
	}
	var cur int64
	if r.rec.DriverEpoch != nil {
		cur = *r.rec.DriverEpoch
	}
	if ifEpoch != nil && cur != *ifEpoch {
		return Claim{}, &ClaimError{RunID: runID, Reason: ClaimTaken}
	}
	next := cur + 1
	r.rec.DriverEpoch = &next
	if ifEpoch != nil {
		r.heartbeat = m.opts.Now()
	}
	return Claim{RunID: runID, Epoch: next}, nil
}

// Heartbeat implements Leaser.
func (m *Memory) Heartbeat(ctx context.Context, claim Claim) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.beat(claim, m.opts.Now())
}

// HeartbeatAll implements BatchLeaser.
func (m *Memory) HeartbeatAll(ctx context.Context, claims []Claim) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lost []string
	now := m.opts.Now()
	for _, c := range claims {
		if errors.Is(m.beat(c, now), ErrClaimLost) {
			lost = append(lost, c.RunID)
		}
	}
	return lost, nil
}

// beat records a heartbeat at now for claim, if it is still held. The
// caller holds m.mu.
func (m *Memory) beat(claim Claim, now time.Time) error {
	r := m.runs[claim.RunID]
	if r == nil {
		return fmt.Errorf("%w: %q", ErrRunNotFound, claim.RunID)
	}
	var cur int64
	if r.rec.DriverEpoch != nil {
		cur = *r.rec.DriverEpoch
	}
	if cur != claim.Epoch {
		return &ClaimLostError{RunID: claim.RunID, Held: claim.Epoch, Observed: cur}
	}
	r.heartbeat = now
	return nil
}

// ListStale implements Leaser.
func (m *Memory) ListStale(ctx context.Context, olderThan time.Duration) ([]RunRecord, error) {
	cutoff := m.opts.Now().Add(-olderThan).UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := func(r *memRun) int64 {
		if r.heartbeat.IsZero() {
			return r.rec.StartedAt.UnixMilli()
		}
		return r.heartbeat.UnixMilli()
	}
	return sortedRuns(maps.Values(m.runs), func(r *memRun) bool {
		return r.rec.Status == StatusRunning && seen(r) <= cutoff
	}, func(a, b *memRun) int {
		return cmp.Or(cmp.Compare(seen(a), seen(b)), cmp.Compare(a.order, b.order))
	}), nil
}

// SaveThread implements ThreadStore.
func (m *Memory) SaveThread(ctx context.Context, t Thread) error {
	if err := t.Validate(); err != nil {
		return err
	}
	t = t.Clone()
	t.UpdatedAt = Millis(t.UpdatedAt)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.threads == nil {
		m.threads = make(map[string]Thread)
	}
	m.threads[t.ThreadID] = t
	return nil
}

// ThreadOwner implements ThreadOwners.
func (m *Memory) ThreadOwner(ctx context.Context, threadID string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	owner, found := m.threadOwner(threadID)
	return owner, found, nil
}

// threadOwner is ThreadOwner, with m.mu held.
func (m *Memory) threadOwner(threadID string) (string, bool) {
	if t, ok := m.threads[threadID]; ok {
		return t.Owner, true
	}
	var first *memRun
	for _, r := range m.threadRuns[threadID] {
		if first == nil || byStart(r, first) < 0 {
			first = r
		}
	}
	if first == nil {
		return "", false
	}
	return first.rec.Owner, true
}

// ClaimThread implements ThreadClaimer.
func (m *Memory) ClaimThread(ctx context.Context, threadID, owner string) (string, error) {
	if !ValidRunID(threadID) {
		return "", fmt.Errorf("durable: invalid thread id %q", threadID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if had, found := m.threadOwner(threadID); found {
		return had, nil
	}
	if m.threads == nil {
		m.threads = make(map[string]Thread)
	}
	m.threads[threadID] = Thread{ThreadID: threadID, Messages: json.RawMessage("[]"), UpdatedAt: Millis(m.opts.Now()), Owner: owner}
	return owner, nil
}

// LoadThread implements ThreadStore.
func (m *Memory) LoadThread(ctx context.Context, threadID string) (Thread, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.threads[threadID]
	if !ok {
		return Thread{}, false, nil
	}
	return t.Clone(), true, nil
}
