package main

import (
	"strings"
	"testing"
)

// A `perf script` excerpt: three samples, each a header line and its
// frames, leaf first.
const script = `goai 100 1.000: 250000 cpu-clock:
	ffff1 __pi_memset+0xb ([kernel.kallsyms])
	a1 modernc.org/sqlite/lib._walFrames+0x1 (/goai)
	b2 github.com/goai-sdk/goai/durable/sqlite.(*writeTx).Commit+0x67 (/goai)
	c3 github.com/goai-sdk/goai/durable/sqlite.(*Store).writer+0x79c (/goai)

goai 100 1.001: 250000 cpu-clock:
	d4 runtime.scanObject+0x1 (/goai)
	e5 runtime.gcBgMarkWorker+0x1 (/goai)

goai 100 1.002: 250000 cpu-clock:
	f6 runtime.memmove+0x1 (/goai)
	a7 github.com/goai-sdk/goai/server.(*logStream).send+0x1 (/goai)
	b8 github.com/goai-sdk/goai/server.(*Handler).readLog+0x1 (/goai)
`

func TestCount(t *testing.T) {
	counts, total, err := count(strings.NewReader(script), byStack)
	if err != nil || total != 3 {
		t.Fatalf("%d samples, %v; want 3", total, err)
	}
	for class, want := range map[string]int{"writer: COMMIT": 1, "GC in the background": 1, "delivery: the rest": 1} {
		if counts[class] != want {
			t.Errorf("%s: %d, want %d (all: %v)", class, counts[class], want, counts)
		}
	}
	roots, _, _ := count(strings.NewReader(script), byRoot)
	if roots["writer"] != 1 || roots["GC"] != 1 || roots["delivery (reader)"] != 1 {
		t.Errorf("by root: %v", roots)
	}
}
