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

// FileEvent is one classified workspace file event.
type FileEvent struct {
	Type FileEventType
	// Path is the absolute virtual path (root + "/" + relative path).
	Path      string
	Timestamp time.Time
}

// FileSnapshot maps file paths to a signature ("<mtime>\t<size>") and keeps
// insertion order, which diffSnapshots walks.
type FileSnapshot struct {
	paths []string
	sigs  map[string]string
}

// NewFileSnapshot returns an empty snapshot with room for n entries.
func NewFileSnapshot(n int) *FileSnapshot {
	return &FileSnapshot{paths: make([]string, 0, n), sigs: make(map[string]string, n)}
}

// Set records path with signature sig.
func (s *FileSnapshot) Set(path, sig string) {
	if _, ok := s.sigs[path]; !ok {
		s.paths = append(s.paths, path)
	}
	s.sigs[path] = sig
}

// Get returns the signature of path.
func (s *FileSnapshot) Get(path string) (string, bool) {
	sig, ok := s.sigs[path]
	return sig, ok
}

// Len is the number of paths.
func (s *FileSnapshot) Len() int { return len(s.sigs) }

// Paths returns the paths in insertion order.
func (s *FileSnapshot) Paths() []string {
	out := make([]string, 0, len(s.sigs))
	for _, p := range s.paths {
		if _, ok := s.sigs[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

// merge returns a copy of s overlaid with o (o's order after s's).
func (s *FileSnapshot) merge(o *FileSnapshot) *FileSnapshot {
	m := NewFileSnapshot(s.Len() + o.Len())
	for _, p := range s.paths {
		m.Set(p, s.sigs[p])
	}
	for _, p := range o.paths {
		m.Set(p, o.sigs[p])
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
func DiffSnapshots(root string, prev, next *FileSnapshot, ts time.Time) []FileEvent {
	var evs []FileEvent
	for _, p := range next.paths {
		sig, ok := next.sigs[p]
		if !ok {
			continue
		}
		old, had := prev.sigs[p]
		switch {
		case !had:
			evs = append(evs, FileEvent{Type: FileCreate, Path: joinRoot(root, p), Timestamp: ts})
		case old != sig:
			evs = append(evs, FileEvent{Type: FileChange, Path: joinRoot(root, p), Timestamp: ts})
		}
	}
	for _, p := range prev.paths {
		if _, ok := prev.sigs[p]; !ok {
			continue
		}
		if _, ok := next.sigs[p]; !ok {
			evs = append(evs, FileEvent{Type: FileDelete, Path: joinRoot(root, p), Timestamp: ts})
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
