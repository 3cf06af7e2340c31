package postgres

import "sync"

// ownNotices counts, per run, the notifications this store's own appends
// have sent (or are about to send, their transaction not yet committed)
// that its listener has not received. An append wakes the log's tailers
// itself, in one step with its entries reaching the cache of recent
// entries; its notification, arriving after that, woke them again to query
// for nothing, or, arriving first, had them read from the database what
// the cache was about to hold: about three queries for every four events
// at 10 ms pacing. The listener skips a notification that a count expects.
//
// A count is raised before the commit, so a notification can never arrive
// ahead of it. A notification the listener skips may be another store's
// for the same run rather than ours (ours still on its way): ours then
// arrives uncounted and wakes the tailers, or, if our commit failed or
// sent nothing, withdraw wakes them in its place. Either way every other
// store's notification wakes the tailers, at worst a notification later.
type ownNotices struct {
	mu sync.Mutex
	n  map[string]int
}

// expect counts a notification of runID about to be sent.
func (o *ownNotices) expect(runID string) {
	if !notifiable(runID) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = make(map[string]int)
	}
	o.n[runID]++
}

// withdraw takes back an expected notification that was not sent (the
// transaction failed, or the append stored nothing), calling wake (another
// store's append: Store.appendedElsewhere) if the listener has skipped a
// notification on its account.
func (o *ownNotices) withdraw(runID string, wake func(runID string)) {
	if !notifiable(runID) {
		return
	}
	o.mu.Lock()
	skipped := o.n[runID] == 0
	if !skipped {
		o.dec(runID)
	}
	o.mu.Unlock()
	if skipped {
		wake(runID)
	}
}

// received reports whether a notification of runID was expected, and
// counts it received.
func (o *ownNotices) received(runID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n[runID] == 0 {
		return false
	}
	o.dec(runID)
	return true
}

func (o *ownNotices) dec(runID string) {
	if o.n[runID]--; o.n[runID] == 0 {
		delete(o.n, runID)
	}
}

// reset forgets every count: the listener reconnected, and what was sent
// while it was away will never arrive (it wakes every tailer instead).
func (o *ownNotices) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.n)
}

// notifiable reports whether runID's notification names it: a longer id
// is sent as an empty payload, which wakes every tailer.
func notifiable(runID string) bool { return len(runID) <= 4000 }
