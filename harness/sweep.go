package harness

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/goai-sdk/goai/sandbox"
)

// DefaultOrphanTTL is how old the files of a journal with no run record
// must be before SweepJournals deletes them.
const DefaultOrphanTTL = time.Hour

// journalSuffixes are the files a journal leaves (see Journal).
var journalSuffixes = []string{".ndjson", ".err", ".prompt", ".pid", ".base", ".lock", ".cancel"}

// DecodeRunID is EncodeRunID's inverse for a journal file's base name (its
// suffix removed). ok is false for a name EncodeRunID cannot have made,
// including an undecodable one and one whose id was shortened with a hash.
func DecodeRunID(name string) (runID string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '_' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(name) {
			return "", false
		}
		v, err := strconv.ParseUint(name[i+1:i+3], 16, 8)
		if err != nil || strings.ToLower(name[i+1:i+3]) != name[i+1:i+3] {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	id := b.String()
	return id, id != "" && EncodeRunID(id) == name
}

// SweepOptions configures SweepJournals.
type SweepOptions struct {
	// Cwd is the working directory of the sweep's commands, for a Dir
	// relative to it.
	Cwd string
	// Over reports whether a run is over (its record is terminal: its
	// journal will never be read again); found is false when no record of
	// the run exists. An error keeps the run's files.
	Over func(ctx context.Context, runID string) (over, found bool, err error)
	// OrphanTTL is how old (by the newest file) an orphan's files must be
	// to be deleted; default DefaultOrphanTTL.
	OrphanTTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// SweepReport says what SweepJournals did.
type SweepReport struct {
	Deleted []string          // run ids whose journal files were deleted
	Kept    map[string]string // file name (or run id) -> why it was kept
}

// SweepJournals deletes, through h, the journal files in dir whose run is
// over, and those of runs with no record once they are older than the
// orphan TTL. It keeps everything else, saying why: a running or paused
// run (a successor may still read its journal), a name that is no run id,
// a run it could not look up, a recent orphan. A journal is otherwise
// deleted by its reader after the exit sentinel; what is left is the
// journal of a run that was cancelled, failed, or lost its agent.
func SweepJournals(ctx context.Context, h sandbox.Handle, dir string, opts SweepOptions) (SweepReport, error) {
	rep := SweepReport{Kept: map[string]string{}}
	if opts.Over == nil {
		return rep, errors.New("harness: SweepJournals needs SweepOptions.Over to tell which runs are over")
	}
	ttl, now := opts.OrphanTTL, opts.Now
	if ttl <= 0 {
		ttl = DefaultOrphanTTL
	}
	if now == nil {
		now = time.Now
	}
	exec := sandbox.ExecOptions{Dir: opts.Cwd}
	// One listing with ages; the directory's own line witnesses that the
	// listing worked (no line: the directory is missing).
	res, err := h.Exec(ctx, "cd "+sandbox.Quote(dir)+" 2>/dev/null || exit 0; stat -c '%Y %n' . * 2>/dev/null; true", exec)
	if err != nil {
		return rep, fmt.Errorf("harness: list journals: %w", err)
	}
	newest := map[string]int64{} // run id -> newest mtime of its files
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		mtime, name, ok := strings.Cut(line, " ")
		if !ok || name == "." {
			continue
		}
		base, known := trimJournalSuffix(name)
		id, decoded := DecodeRunID(base)
		secs, perr := strconv.ParseInt(mtime, 10, 64)
		switch {
		case !known || !decoded:
			rep.Kept[name] = "not a journal file of a run id"
		case perr != nil:
			rep.Kept[name] = "no age"
		default:
			newest[id] = max(newest[id], secs)
		}
	}
	for id, mtime := range newest {
		over, found, err := opts.Over(ctx, id)
		switch {
		case err != nil:
			rep.Kept[id] = "run lookup failed: " + err.Error()
			continue
		case found && !over:
			rep.Kept[id] = "run not over"
			continue
		case !found && now().Sub(time.Unix(mtime, 0)) < ttl:
			rep.Kept[id] = "orphan too recent"
			continue
		}
		j := Journal{Dir: dir, RunID: id, Cwd: opts.Cwd}
		if err := j.Remove(ctx, h); err != nil {
			rep.Kept[id] = "delete failed: " + err.Error()
			continue
		}
		rep.Deleted = append(rep.Deleted, id)
	}
	return rep, nil
}

func trimJournalSuffix(name string) (string, bool) {
	for _, s := range journalSuffixes {
		if base, ok := strings.CutSuffix(name, s); ok {
			return base, true
		}
	}
	return "", false
}
