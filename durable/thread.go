package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Thread is the stored state of one conversation (MessageStore upstream): its transcript and the interrupts its latest run paused
// on. A reloading client hydrates from it.
type Thread struct {
	ThreadID string
	// Messages is the transcript, a JSON array of UIMessages, stored and
	// returned verbatim.
	Messages json.RawMessage
	// RunID is the run that saved the thread last.
	RunID string
	// Interrupts is the JSON array of the interrupts RunID paused on and
	// that are still pending; nil when it did not pause.
	Interrupts json.RawMessage
	// UpdatedAt is when the thread was saved, with millisecond precision.
	UpdatedAt time.Time
	// Owner is the principal whose thread it is ("" for an open server).
	Owner string
}

// Clone returns a deep copy of t.
func (t Thread) Clone() Thread {
	c := t
	c.Messages = cloneRaw(t.Messages)
	c.Interrupts = cloneRaw(t.Interrupts)
	return c
}

func cloneRaw(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// Validate reports a thread no store accepts: an empty or invalid thread
// id, Messages that are not a JSON array, or Interrupts that are neither nil
// nor a JSON array.
func (t Thread) Validate() error {
	if !ValidRunID(t.ThreadID) {
		return fmt.Errorf("durable: invalid thread id %q", t.ThreadID)
	}
	if !isJSONArray(t.Messages) {
		return fmt.Errorf("durable: messages of thread %q are not a JSON array", t.ThreadID)
	}
	if t.Interrupts != nil && !isJSONArray(t.Interrupts) {
		return fmt.Errorf("durable: interrupts of thread %q are not a JSON array", t.ThreadID)
	}
	return nil
}

func isJSONArray(b json.RawMessage) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '[':
			return json.Valid(b)
		}
		return false
	}
	return false
}

// ThreadStore stores conversations for hydration. Implementations are safe
// for concurrent use.
type ThreadStore interface {
	// SaveThread stores t, replacing whatever was stored for t.ThreadID (a
	// full overwrite). UpdatedAt is stored with millisecond precision.
	SaveThread(ctx context.Context, t Thread) error

	// LoadThread returns the stored thread; ok is false, with no error, for
	// a thread never saved.
	LoadThread(ctx context.Context, threadID string) (t Thread, ok bool, err error)
}

// ThreadOwners is implemented by stores that can tell who owns a thread
// without loading it. A server checks the owner on every request to a
// thread, and a thread's transcript grows with the conversation.
type ThreadOwners interface {
	// ThreadOwner returns the owner of threadID: that of its saved thread,
	// or else that of its first run (the earliest started). found is false,
	// with no error, when it has neither.
	ThreadOwner(ctx context.Context, threadID string) (owner string, found bool, err error)
}

// ThreadClaimer is implemented by stores that can give a thread an owner
// atomically. A server claims a thread that has no owner before it runs
// anything on it: two principals starting the first runs of one new thread
// at once cannot both find it unowned, and a thread whose runs keep no log
// (plain streams) has an owner all the same.
type ThreadClaimer interface {
	// ClaimThread makes owner the owner of threadID unless it has one
	// (ThreadOwner's answer), and returns the owner it has afterwards:
	// owner, or the one it had. A thread it claims is recorded as a saved
	// thread with an empty transcript, no run and owner.
	ClaimThread(ctx context.Context, threadID, owner string) (string, error)
}
