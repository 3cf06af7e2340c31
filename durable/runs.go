package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// RunStatus is the lifecycle state of a run.
type RunStatus string

// Run statuses. Completed, Failed and Aborted are terminal; Interrupted is a
// non-terminal pause for a human (pending approvals) with no FinishedAt.
const (
	StatusRunning     RunStatus = "running"
	StatusInterrupted RunStatus = "interrupted"
	StatusCompleted   RunStatus = "completed"
	StatusFailed      RunStatus = "failed"
	StatusAborted     RunStatus = "aborted"
)

// CheckNewRun returns rec as a store records a new run (CreateOrResume,
// RunStarter.StartRun): its status defaulted to running. It fails for an
// invalid run id or status.
func CheckNewRun(rec RunRecord) (RunRecord, error) {
	if err := CheckRunID(rec.RunID); err != nil {
		return RunRecord{}, err
	}
	if rec.Status == "" {
		rec.Status = StatusRunning
	}
	if !rec.Status.Valid() {
		return RunRecord{}, fmt.Errorf("durable: invalid run status %q", rec.Status)
	}
	return rec, nil
}

// Valid reports whether s is one of the known statuses.
func (s RunStatus) Valid() bool {
	switch s {
	case StatusRunning, StatusInterrupted, StatusCompleted, StatusFailed, StatusAborted:
		return true
	}
	return false
}

// Terminal reports whether s ends the run.
func (s RunStatus) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusAborted
}

// RunError is the error stored on a failed run.
type RunError struct {
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
}

// RunRecord is the stored state of one run. Times have millisecond
// precision and are returned in UTC. Nil pointer fields are absent, which is
// distinct from their zero value (CancelRequested false, DriverEpoch 0).
type RunRecord struct {
	RunID      string
	ThreadID   string
	Status     RunStatus
	StartedAt  time.Time
	FinishedAt *time.Time
	Error      *RunError
	// Usage is the run's usage accounting, stored as opaque JSON.
	Usage json.RawMessage

	// Owner is the principal that started the run ("" for an open
	// server); set at creation and never updated.
	Owner string

	// Durable-run fields, owned by the sandbox and takeover layers.
	SandboxKey      *string
	DetachedSince   *time.Time
	CancelRequested *bool
	DriverEpoch     *int64
}

// Clone returns a deep copy of r.
func (r RunRecord) Clone() RunRecord {
	c := r
	c.FinishedAt = clonePtr(r.FinishedAt)
	c.Error = clonePtr(r.Error)
	if r.Usage != nil {
		c.Usage = append(json.RawMessage(nil), r.Usage...)
	}
	c.SandboxKey = clonePtr(r.SandboxKey)
	c.DetachedSince = clonePtr(r.DetachedSince)
	c.CancelRequested = clonePtr(r.CancelRequested)
	c.DriverEpoch = clonePtr(r.DriverEpoch)
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Ptr returns a pointer to v, for filling RunRecord fields.
func Ptr[T any](v T) *T { return &v }

// Patch is one field of a RunPatch: untouched (the zero Patch), set to a
// value (Set) or cleared to absent (Clear).
type Patch[T any] struct {
	op    patchOp
	value T
}

type patchOp uint8

const (
	patchKeep patchOp = iota
	patchSet
	patchClear
)

// Set returns a Patch that sets a field to v.
func Set[T any](v T) Patch[T] { return Patch[T]{op: patchSet, value: v} }

// Clear returns a Patch that clears a field (it reads back absent).
func Clear[T any]() Patch[T] { return Patch[T]{op: patchClear} }

// IsSet reports whether p sets a value, and returns it.
func (p Patch[T]) IsSet() (T, bool) { return p.value, p.op == patchSet }

// IsClear reports whether p clears the field.
func (p Patch[T]) IsClear() bool { return p.op == patchClear }

// Untouched reports whether p leaves the field as it is.
func (p Patch[T]) Untouched() bool { return p.op == patchKeep }

func (p Patch[T]) applyPtr(dst **T) {
	switch p.op {
	case patchSet:
		v := p.value
		*dst = &v
	case patchClear:
		*dst = nil
	}
}

// RunPatch is a partial update of a RunRecord: every field is untouched
// unless set or cleared.
type RunPatch struct {
	Status          Patch[RunStatus] // cannot be cleared
	FinishedAt      Patch[time.Time]
	Error           Patch[RunError]
	Usage           Patch[json.RawMessage]
	SandboxKey      Patch[string]
	DetachedSince   Patch[time.Time]
	CancelRequested Patch[bool]
	DriverEpoch     Patch[int64]

	// IfEpoch, when positive, fences the update: it applies only while the
	// run's DriverEpoch equals IfEpoch, checked atomically with the write;
	// otherwise Update changes nothing and returns a *ClaimLostError.
	IfEpoch int64
}

// Validate reports a patch no store accepts.
func (p RunPatch) Validate() error {
	if p.Status.IsClear() {
		return fmt.Errorf("durable: run status cannot be cleared")
	}
	if s, ok := p.Status.IsSet(); ok && !s.Valid() {
		return fmt.Errorf("durable: invalid run status %q", s)
	}
	if u, ok := p.Usage.IsSet(); ok && u != nil && !json.Valid(u) {
		return fmt.Errorf("durable: run usage is not valid JSON")
	}
	return nil
}

// CheckEpoch is the store's IfEpoch fence: a *ClaimLostError when p is
// fenced (IfEpoch positive) and r, the run as stored, has another
// DriverEpoch. A store calls it in the transaction that writes the patch.
func (p RunPatch) CheckEpoch(r RunRecord) error {
	if p.IfEpoch <= 0 {
		return nil
	}
	var observed int64
	if r.DriverEpoch != nil {
		observed = *r.DriverEpoch
	}
	if observed != p.IfEpoch {
		return &ClaimLostError{RunID: r.RunID, Held: p.IfEpoch, Observed: observed}
	}
	return nil
}

// Apply applies p to r in place. Times are truncated to milliseconds. It
// ignores IfEpoch, which the store checks. (CheckEpoch).
func (p RunPatch) Apply(r *RunRecord) {
	if s, ok := p.Status.IsSet(); ok {
		r.Status = s
	}
	p.FinishedAt.applyPtr(&r.FinishedAt)
	if r.FinishedAt != nil {
		r.FinishedAt = Ptr(Millis(*r.FinishedAt))
	}
	p.Error.applyPtr(&r.Error)
	switch u, ok := p.Usage.IsSet(); {
	case ok && u != nil:
		r.Usage = append(json.RawMessage(nil), u...)
	case ok, p.Usage.IsClear(): // setting nil clears
		r.Usage = nil
	}
	p.SandboxKey.applyPtr(&r.SandboxKey)
	p.DetachedSince.applyPtr(&r.DetachedSince)
	if r.DetachedSince != nil {
		r.DetachedSince = Ptr(Millis(*r.DetachedSince))
	}
	p.CancelRequested.applyPtr(&r.CancelRequested)
	p.DriverEpoch.applyPtr(&r.DriverEpoch)
}

// Millis truncates t to the millisecond precision of stored times and
// returns it in UTC.
func Millis(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

// Claim is a driver's exclusive right to produce a run, fenced by Epoch: a
// later claim of the same run has a higher epoch and makes this one's fenced
// writes fail with ErrClaimLost.
type Claim struct {
	RunID string
	Epoch int64
}

// ClaimReason says why a claim was refused.
type ClaimReason string

// Claim refusal reasons.
const (
	ClaimUnknown  ClaimReason = "unknown"
	ClaimTerminal ClaimReason = "terminal"
)

// ClaimError is a refused claim (RunClaimNotAcquiredError upstream). It wraps
// ErrClaimNotAcquired.
type ClaimError struct {
	RunID  string
	Reason ClaimReason
}

func (e *ClaimError) Error() string {
	return fmt.Sprintf("durable: claim of run %q not acquired: %s", e.RunID, e.Reason)
}

func (e *ClaimError) Unwrap() error { return ErrClaimNotAcquired }

// ClaimLostError reports a fenced write refused because the run was claimed
// by a successor (RunClaimLostError upstream). It wraps ErrClaimLost.
type ClaimLostError struct {
	RunID    string
	Held     int64 // the writer's epoch
	Observed int64 // the run's epoch when the write was refused (0: no record)
}

func (e *ClaimLostError) Error() string {
	return fmt.Sprintf("durable: claim of run %q lost: held epoch %d, observed %d", e.RunID, e.Held, e.Observed)
}

func (e *ClaimLostError) Unwrap() error { return ErrClaimLost }

// CancelLister is implemented by run stores that tell, in one query,
// which of several runs have a cancel recorded: a server producing many
// runs then polls for cancels recorded elsewhere (another replica, the
// reaper) with one query per interval instead of one per run.
type CancelLister interface {
	// CancelRequested returns those of runIDs whose record has
	// CancelRequested set, in no particular order; unknown runs are left
	// out.
	CancelRequested(ctx context.Context, runIDs []string) ([]string, error)
}

// RunStore stores run records (RunStore upstream, docs/durable.md §4) and hands out
// fencing claims (§5.1). Implementations are safe for concurrent use.
type RunStore interface {
	// CreateOrResume stores rec if no record of rec.RunID exists (Status
	// defaults to running) and returns the stored record. An existing
	// record is returned unchanged: never updated, never revived.
	CreateOrResume(ctx context.Context, rec RunRecord) (RunRecord, error)

	// Get returns the record of runID, or ErrRunNotFound.
	Get(ctx context.Context, runID string) (RunRecord, error)

	// Update applies patch to the record of runID. Updating an unknown run
	// is a no-op and not an error.
	Update(ctx context.Context, runID string, patch RunPatch) error

	// FindActiveRun returns the newest (by StartedAt) running run of
	// threadID; ok is false when there is none.
	FindActiveRun(ctx context.Context, threadID string) (rec RunRecord, ok bool, err error)

	// ListByThread returns the runs of threadID by ascending StartedAt.
	ListByThread(ctx context.Context, threadID string) ([]RunRecord, error)

	// ListReclaimable returns the running runs detached at or before
	// now-ttl (inclusive), oldest detach first.
	ListReclaimable(ctx context.Context, now time.Time, ttl time.Duration) ([]RunRecord, error)

	// Claim takes over the run: it refuses an unknown run (ClaimUnknown) or a
	// terminal one (ClaimTerminal) with a *ClaimError and no change, and
	// otherwise atomically sets DriverEpoch to its previous value (absent =
	// 0) plus one and returns that epoch.
	Claim(ctx context.Context, runID string) (Claim, error)
}

// Store is a backend holding both the delivery logs and the run records, so
// that appends and record writes can be fenced by the same claim.
type Store interface {
	Log
	RunStore
}
