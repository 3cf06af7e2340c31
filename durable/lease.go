package durable

import (
	"context"
	"time"
)

// ClaimTaken is the refusal of a compare-and-set claim ([Leaser.ClaimIf])
// whose expected epoch is no longer the run's: another driver claimed it
// first.
const ClaimTaken ClaimReason = "claimed by another driver"

// Leaser is implemented by run stores that can tell a live producer from a
// dead one, so that a run whose producer died (a server killed mid-run) can
// be reclaimed instead of leaving its readers parked forever.
//
// A producer claims its run with ClaimIf(runID, 0) (so a duplicate request,
// on this replica or another, never starts a second producer), appends with
// the claim's epoch, and calls Heartbeat periodically. A sweeper lists the
// runs whose heartbeat is older than the lease with ListStale and takes each
// over with ClaimIf(runID, observedEpoch): the claim fences the dead
// producer (its appends and heartbeats fail with ErrClaimLost) and two
// sweepers racing for one run cannot both win.
type Leaser interface {
	// ClaimIf is a compare-and-set Claim: it claims runID only while the
	// run's DriverEpoch (absent = 0) equals epoch, setting it to epoch+1,
	// and records a heartbeat for the new claim in the same transaction.
	// It refuses with a *ClaimError: ClaimUnknown, ClaimTerminal, or
	// ClaimTaken when the epoch has moved; a refusal changes nothing.
	ClaimIf(ctx context.Context, runID string, epoch int64) (Claim, error)

	// Heartbeat records, with the store's clock, that the holder of claim
	// is alive. It fails with a *ClaimLostError (and records nothing) when
	// the run's DriverEpoch is no longer claim.Epoch, and with
	// ErrRunNotFound for an unknown run. A heartbeat of a terminal run
	// still held by claim is accepted and harmless.
	Heartbeat(ctx context.Context, claim Claim) error

	// ListStale returns the running runs whose last heartbeat, or, when
	// they never had one, whose StartedAt, is at or before the store's now
	// minus olderThan (inclusive), oldest first. Interrupted and terminal
	// runs are never stale: they have no producer to lose.
	ListStale(ctx context.Context, olderThan time.Duration) ([]RunRecord, error)
}

// RunStarter is implemented by Leasers that record a new run and claim it
// in one transaction: a server starting a run then waits for one commit
// before its first byte, where CreateOrResume and then ClaimIf wait for
// two.
type RunStarter interface {
	Leaser
	// StartRun is CreateOrResume(rec) followed, in the same transaction,
	// by ClaimIf(rec.RunID, 0) when the run it returns is rec.Owner's,
	// running and not cancelled. It returns the run as stored afterwards
	// (with the claim's epoch when claimed); claimed reports the claim. A
	// run another driver holds already is not claimed, and is not an
	// error.
	StartRun(ctx context.Context, rec RunRecord) (stored RunRecord, claim Claim, claimed bool, err error)
}

// BatchLeaser is implemented by Leasers that renew many claims in one call:
// a server producing many runs then keeps every lease with one store write
// per heartbeat interval instead of one per run.
type BatchLeaser interface {
	// HeartbeatAll records, as Heartbeat does, a heartbeat for each of
	// claims still held, in one transaction. It returns the run ids of the
	// claims no longer held (the run's DriverEpoch moved on): those get no
	// heartbeat. Unknown runs are left out of lost and get none either.
	HeartbeatAll(ctx context.Context, claims []Claim) (lost []string, err error)
}
