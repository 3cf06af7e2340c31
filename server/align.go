package server

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/durable"
)

// DivergedCode is the RUN_ERROR code of a taken-over run whose replay did
// not reproduce what its log already held.
const DivergedCode = "takeover-diverged"

// aligner lines up a re-driven run's events with the log its dead producer
// left: the log wins for what clients have seen, the replay for where the
// run goes on. A replayed event equal to the next stored one (ignoring its
// timestamp and key order) is already in the log and is dropped; the first
// event past the stored prefix, and everything after it, is appended.
//
// CUSTOM events are out of band: the sandbox's file events depend on when
// its watcher ran, and the run.accepted marker is written only once, so
// they are not part of the sequence that must repeat. A replayed CUSTOM
// event is dropped when an equal stored one has not been matched yet, and
// appended otherwise.
//
// Any other mismatch is a bug in the replay (an adapter that is not
// deterministic, a journal that changed): the run fails with DivergedCode
// rather than show clients a history that contradicts what they saw.
type aligner struct {
	stored   [][]byte       // fingerprints of the stored in-band events, in order
	cursor   int            // next stored in-band event to match
	custom   map[string]int // fingerprints of stored CUSTOM events not yet matched
	diverged bool
}

func newAligner(entries []durable.Entry) *aligner {
	a := &aligner{custom: map[string]int{}}
	for _, e := range entries {
		fp, custom := fingerprint(e.Data)
		if custom {
			a.custom[string(fp)]++
		} else {
			a.stored = append(a.stored, fp)
		}
	}
	return a
}

// admit reports whether e must be appended. After a divergence only a
// terminal event passes: the run's end, saying why.
func (a *aligner) admit(e *agui.Event, wire []byte) (bool, error) {
	if a.diverged {
		return e.IsTerminal(), nil
	}
	fp, custom := fingerprint(wire)
	if custom {
		if a.custom[string(fp)] > 0 {
			a.custom[string(fp)]--
			return false, nil
		}
		return true, nil
	}
	if a.cursor >= len(a.stored) {
		return true, nil
	}
	if bytes.Equal(fp, a.stored[a.cursor]) {
		a.cursor++
		return false, nil
	}
	a.diverged = true
	return false, a.divergence(fmt.Sprintf("at stored event %d: the log holds %s, the replay produced %s", a.cursor, a.stored[a.cursor], fp))
}

// end is called when the replay ended: a replay that did not reach the
// end of the stored prefix diverged too.
func (a *aligner) end() error {
	if a.diverged || a.cursor >= len(a.stored) {
		return nil
	}
	a.diverged = true
	return a.divergence(fmt.Sprintf("the replay ended after %d of the %d events the log holds", a.cursor, len(a.stored)))
}

func (a *aligner) divergence(detail string) error {
	return &chat.RunError{Code: DivergedCode, Message: "The run could not be taken over: its replay diverged from what was already delivered (" + detail + ")."}
}

// fingerprint is an event's wire JSON without its timestamp, with keys in
// a canonical order; custom reports a CUSTOM event. Data that is not a JSON
// object is its own fingerprint.
func fingerprint(data []byte) (fp []byte, custom bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return data, false
	}
	delete(m, "timestamp")
	custom = string(m["type"]) == `"`+string(agui.Custom)+`"`
	out, err := json.Marshal(m) // map keys are sorted
	if err != nil {
		return data, custom
	}
	return out, custom
}
