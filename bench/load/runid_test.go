package main

import (
	"slices"
	"testing"
)

// Sorted run ids sort in the order runs start (every client's round 0,
// then round 1, ...); the default ones sort by client.
func TestRunIDOrder(t *testing.T) {
	const clients, runs = 12, 11 // two-digit numbers: a plain %d would sort "10" before "2"
	for _, sorted := range []bool{true, false} {
		cfg := config{runPrefix: "p", sortedIDs: sorted}
		var started []string
		for r := range runs {
			for c := range clients {
				started = append(started, cfg.runID(c, r))
			}
		}
		if got := slices.IsSorted(started); got != sorted {
			t.Errorf("sorted-ids %v: ids in start order are sorted: %v (%q...)", sorted, got, started[:3])
		}
		if n := len(slices.Compact(slices.Sorted(slices.Values(started)))); n != clients*runs {
			t.Errorf("sorted-ids %v: %d distinct ids for %d runs", sorted, n, clients*runs)
		}
	}
}
