package sandbox

import (
	"strings"
	"time"
)

// FileEventType is create, change or delete.
type FileEventType string

const (
	FileCreate FileEventType = "create"
	FileChange FileEventType = "change"
	FileDelete FileEventType = "delete"
)

// WatchEvent is one classified workspace file event.
type WatchEvent struct {
	Type FileEventType
	// Path is the absolute virtual path (root + "/" + relative path).
	Path      string
	Timestamp time.Time
}

// FileSnapshot maps file paths to a signature ("<mtime>\t<size>") and keeps
// insertion order, which DiffSnapshots walks.
type FileSnapshot struct {
	entries []snapEntry
	index   map[string]int
}

type snapEntry struct{ path, sig string }

// NewFileSnapshot returns an empty snapshot with room for n entries.
func NewFileSnapshot(n int) *FileSnapshot {
	return &FileSnapshot{entries: make([]snapEntry, 0, n), index: make(map[string]int, n)}
}

// Set records path with signature sig.
func (s *FileSnapshot) Set(path, sig string) {
	if i, ok := s.index[path]; ok {
		s.entries[i].sig = sig
		return
	}
	s.index[path] = len(s.entries)
	s.entries = append(s.entries, snapEntry{path, sig})
}

// Get returns the signature of path.
func (s *FileSnapshot) Get(path string) (string, bool) {
	i, ok := s.index[path]
	if !ok {
		return "", false
	}
	return s.entries[i].sig, true
}

// Len is the number of paths.
func (s *FileSnapshot) Len() int { return len(s.entries) }

// Paths returns the paths in insertion order.
func (s *FileSnapshot) Paths() []string {
	out := make([]string, len(s.entries))
	for i, e := range s.entries {
		out[i] = e.path
	}
	return out
}

// merge returns a copy of s overlaid with o (o's new paths after s's).
func (s *FileSnapshot) merge(o *FileSnapshot) *FileSnapshot {
	m := NewFileSnapshot(s.Len() + o.Len())
	for _, e := range s.entries {
		m.Set(e.path, e.sig)
	}
	for _, e := range o.entries {
		m.Set(e.path, e.sig)
	}
	return m
}

// ParseFindOutput parses the output of
//
//	find . -type f … -printf '%T@\t%s\t%p\n'
//
// into a snapshot keyed by the relative path ("./" stripped). Empty lines
// and lines without two tabs are skipped. The keys and signatures share
// memory with out.
func ParseFindOutput(out string) *FileSnapshot {
	s := NewFileSnapshot(strings.Count(out, "\n") + 1)
	for len(out) > 0 {
		line := out
		if i := strings.IndexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:]
		} else {
			out = ""
		}
		t1 := strings.IndexByte(line, '\t')
		if t1 < 0 {
			continue
		}
		t2 := strings.IndexByte(line[t1+1:], '\t')
		if t2 < 0 {
			continue
		}
		t2 += t1 + 1
		// Regex ^\./? : strip a leading "." and then one "/".
		p := line[t2+1:]
		if strings.HasPrefix(p, ".") {
			p = p[1:]
			p = strings.TrimPrefix(p, "/")
		}
		s.Set(p, line[:t2])
	}
	return s
}

// DiffSnapshots compares two snapshots keyed by relative path: first the
// paths of next in insertion order (create when new, change when the
// signature differs), then the paths of prev missing from next (delete).
// All events share ts; paths are joined to root. It is pure.
func DiffSnapshots(root string, prev, next *FileSnapshot, ts time.Time) []WatchEvent {
	var evs []WatchEvent
	matched := 0
	for _, e := range next.entries {
		i, had := prev.index[e.path]
		switch {
		case !had:
			evs = append(evs, WatchEvent{Type: FileCreate, Path: joinRoot(root, e.path), Timestamp: ts})
		default:
			matched++
			if prev.entries[i].sig != e.sig {
				evs = append(evs, WatchEvent{Type: FileChange, Path: joinRoot(root, e.path), Timestamp: ts})
			}
		}
	}
	if matched == len(prev.entries) {
		return evs // every previous path is still there: no deletes
	}
	for _, e := range prev.entries {
		if _, ok := next.index[e.path]; !ok {
			evs = append(evs, WatchEvent{Type: FileDelete, Path: joinRoot(root, e.path), Timestamp: ts})
		}
	}
	return evs
}

// joinRoot joins root (trailing slashes removed) and a relative path.
func joinRoot(root, rel string) string {
	return strings.TrimRight(root, "/") + "/" + rel
}

// relPath strips "<root>/" from p; p is returned unchanged when it is not
// under root.
func relPath(root, p string) string {
	prefix := strings.TrimRight(root, "/") + "/"
	if strings.HasPrefix(p, prefix) {
		return p[len(prefix):]
	}
	return p
}

// Quote quotes s for a POSIX shell. Each embedded single quote is closed,
// backslash-escaped and reopened.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
