package postgres

import (
	"strings"
	"testing"

	"github.com/goai-sdk/goai/durable/internal/notify"
)

func TestOwnNotices(t *testing.T) {
	var hub notify.Hub
	var own ownNotices
	woken := func(run string, do func()) bool {
		sub := hub.Subscribe(run)
		defer sub.Close()
		w := sub.Wait()
		do()
		select {
		case <-w.C:
			return true
		default:
			return false
		}
	}

	own.expect("r")
	if !own.received("r") || own.received("r") {
		t.Fatal("an expected notification was not skipped once, and once only")
	}

	// Sent nothing (a failed commit): withdrawn, nothing to make up for.
	own.expect("r")
	if woken("r", func() { own.withdraw("r", hub.Wake) }) {
		t.Fatal("withdrawing an unreceived notification woke the tailers")
	}
	if own.received("r") {
		t.Fatal("a withdrawn notification is still expected")
	}

	// The listener skipped another store's notification on our count,
	// and ours never came: withdrawing wakes the tailers in its place.
	own.expect("r")
	if !own.received("r") {
		t.Fatal("not skipped")
	}
	if !woken("r", func() { own.withdraw("r", hub.Wake) }) {
		t.Fatal("a notification skipped on a withdrawn count was not made up for")
	}

	// A run id too long for a payload is sent as an empty one.
	long := strings.Repeat("x", 4001)
	own.expect(long)
	if own.received(long) {
		t.Fatal("an empty payload's notification was expected")
	}
	if woken(long, func() { own.withdraw(long, hub.Wake) }) {
		t.Fatal("withdrawing a notification never counted woke the tailers")
	}

	// A reconnected listener expects nothing: what was sent meanwhile is lost.
	own.expect("r")
	own.reset()
	if own.received("r") {
		t.Fatal("a count survived the listener's reconnection")
	}
}
