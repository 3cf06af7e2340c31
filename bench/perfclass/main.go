// Command perfclass sorts the samples of a `perf record -g` profile of goai
// serve into the classes bench/README.md reports (the engine, the SQLite
// writer's parts, delivery, GC, ...) by the functions on each sample's
// stack, and prints each class in µs of CPU per event delivered.
//
//	perf record -F 4000 -g -p PID -o perf.data -- sleep 8
//	perf script -i perf.data | go run ./bench/perfclass -events N -hz 4000
//
// N is the events delivered while perf recorded (events/s from bench/load
// times the seconds). -roots classifies by a sample's goroutine instead
// (writer, checkpointer, delivery, engine, scheduler), as the 50 ms
// profiles do.
package main

import (
	"bufio"
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

func main() {
	events := flag.Float64("events", 0, "events delivered while perf recorded")
	hz := flag.Float64("hz", 4000, "perf's sampling frequency")
	roots := flag.Bool("roots", false, "classify by the sample's goroutine")
	flag.Parse()
	if *events <= 0 {
		fmt.Fprintln(os.Stderr, "perfclass: -events is required")
		os.Exit(2)
	}
	classify := byStack
	if *roots {
		classify = byRoot
	}
	counts, total, err := count(os.Stdin, classify)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfclass:", err)
		os.Exit(1)
	}
	perEvent := func(n int) float64 { return float64(n) / *hz / *events * 1e6 }
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(counts[b], counts[a]) })
	for _, k := range keys {
		fmt.Printf("%-32s %8d %8.3f µs/event\n", k, counts[k], perEvent(counts[k]))
	}
	fmt.Printf("%-32s %8d %8.3f µs/event\n", "total", total, perEvent(total))
}

// count reads `perf script` output (samples separated by blank lines, one
// frame a line: address, symbol, object) and counts each sample's class.
func count(r io.Reader, classify func(stack string) string) (map[string]int, int, error) {
	counts := map[string]int{}
	total := 0
	var frames []string
	flush := func() {
		if len(frames) > 0 {
			counts[classify(strings.Join(frames, " "))]++
			total++
		}
		frames = frames[:0]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	header := true
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			flush()
			header = true
		case header:
			header = false // the sample's own line: command, pid, time, event
		default:
			if f := strings.Fields(line); len(f) > 1 {
				frames = append(frames, f[1])
			}
		}
	}
	flush()
	return counts, total, sc.Err()
}

func has(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// byStack is the eighteenth pass's classes.
func byStack(s string) string {
	switch {
	case has(s, "Store).checkpointer"):
		return "the checkpointer"
	case has(s, "Store).writer"):
		switch {
		case has(s, "writeTx).Commit"):
			return "writer: COMMIT"
		case has(s, "Recent).add"):
			return "writer: recent cache"
		case has(s, "appendJob"):
			return "writer: appends"
		case has(s, "Store).begin"):
			return "writer: BEGIN"
		case has(s, "Store).run"):
			return "writer: lifecycle writes"
		}
		return "writer: other"
	case has(s, "gcBgMarkWorker", "gcDrain", "bgsweep", "bgscavenge"):
		return "GC in the background"
	case has(s, "ThreadOwner"):
		return "requests: thread owner"
	case has(s, "readLog", "logStream", "streamWriter).send"):
		if has(s, "sys_write", "tcp_sendmsg", "Syscall") {
			return "delivery: socket writes"
		}
		return "delivery: the rest"
	case has(s, "producer).run", "WriteRun", "chat.(*run).execute"):
		switch {
		case has(s, "groupCommit", "AppendQueued", "producer).keep", "producer).emit"):
			return "the log hand-off"
		case has(s, "gcAssist", "mallocgc"):
			return "engine: malloc, GC assists"
		}
		return "the engine and encoding"
	case has(s, "conn).serve"):
		return "requests: the rest"
	case has(s, "runtime.mcall", "runtime.schedule", "findRunnable", "sysmon", "futex"):
		return "scheduler"
	}
	return "other"
}

// byRoot classifies by the goroutine a sample ran on.
func byRoot(s string) string {
	switch {
	case has(s, "Store).checkpointer"):
		return "checkpointer"
	case has(s, "Store).writer"):
		return "writer"
	case has(s, "gcBgMarkWorker", "gcDrain", "bgsweep", "bgscavenge"):
		return "GC"
	case has(s, "readLog", "logStream", "follow", "streamWriter).send"):
		return "delivery (reader)"
	case has(s, "producer).run", "chat.(*run)", "pacer", "plainEvents", "safeStream"):
		return "engine/producer"
	case has(s, "conn).serve"):
		return "requests: the rest"
	case has(s, "runtime.mcall", "runtime.schedule", "findRunnable", "runtime.park_m", "sysmon", "netpoll"):
		return "scheduler/netpoll"
	}
	return "other"
}
