package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/goai-sdk/goai/sandbox"
)

const (
	outsideMark = "__GOAI_OUTSIDE__"
	missingMark = "__GOAI_ENOENT__"
	exitOutside = 97
	exitMissing = 98
)

// prelude is prepended to every filesystem script. $1 is the real
// workspace root (R), the operation's arguments follow.
//
// rp prints the real path of $1 with symlinks resolved, allowing a missing
// tail (and following a dangling link lexically). chk IDX PATH FOLLOW
// exits 97 when PATH (with FOLLOW=0: its parent) resolves outside R.
const prelude = `R="$1"; shift
rp() {
	local e rest r t
	e="$1"; rest=
	while [ ! -e "$e" ] && [ ! -L "$e" ]; do
		rest="/${e##*/}$rest"; e="${e%/*}"; [ -n "$e" ] || e=/
	done
	if r=$(readlink -f "$e" 2>/dev/null) && [ -n "$r" ]; then :; else
		[ "$2" -lt 40 ] || return 1
		t=$(readlink "$e") || return 1
		case "$t" in /*) ;; *) t="${e%/*}/$t" ;; esac
		r=$(rp "$t" $(($2 + 1))) || return 1
	fi
	r="${r%/}$rest"
	printf '%s\n' "${r:-/}"
}
chk() {
	local t r
	t="$2"
	if [ "$3" = 0 ] && [ "$t" != "$R" ]; then t="${t%/*}"; [ -n "$t" ] || t=/; fi
	r=$(rp "$t" 0) || { echo "` + outsideMark + ` $1" >&2; exit 97; }
	case "$r" in "$R"|"$R"/*) ;; *) echo "` + outsideMark + ` $1" >&2; exit 97 ;; esac
}
missing() { echo ` + missingMark + ` >&2; exit 98; }
`

// FS is the filesystem of a container, implemented over exec.
type FS struct{ h *Handle }

// script runs prelude+body with the container paths of names as $1.. and
// extra arguments after them. It maps the confinement and missing-file
// exits to errors.
func (f *FS) script(ctx context.Context, op, body string, names []string, extra []string, stdin io.Reader, stdout io.Writer) error {
	h := f.h
	args := []string{"sh", "-c", prelude + body, "sh", h.realRoot}
	for _, n := range names {
		c, err := h.containerPath(n)
		if err != nil {
			return err
		}
		args = append(args, c)
	}
	args = append(args, extra...)
	var stderr bytes.Buffer
	code, err := h.run(ctx, args, "/", nil, stdin, stdout, &stderr)
	if err != nil {
		return fmt.Errorf("docker: %s %s: %w", op, names[0], err)
	}
	switch code {
	case 0:
		return nil
	case exitOutside:
		if _, idx, ok := strings.Cut(strings.TrimSpace(stderr.String()), outsideMark+" "); ok {
			if i, err := strconv.Atoi(idx); err == nil && i < len(names) {
				return h.outside(names[i])
			}
		}
		return h.outside(names[0])
	case exitMissing:
		return &fs.PathError{Op: op, Path: names[0], Err: fs.ErrNotExist}
	}
	return fmt.Errorf("docker: %s %s: exit %d: %s", op, names[0], code, strings.TrimSpace(stderr.String()))
}

func (f *FS) ReadFile(ctx context.Context, name string) ([]byte, error) {
	var out bytes.Buffer
	err := f.script(ctx, "read", `chk 0 "$1" 1; [ -e "$1" ] || missing; exec cat "$1"`, []string{name}, nil, nil, &out)
	if err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// WriteFile writes data (streamed on the exec's stdin), creating parent
// directories. perm applies to a new file; 0 means 0644.
func (f *FS) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	if perm == 0 {
		perm = 0o644
	}
	return f.script(ctx, "write",
		`chk 0 "$1" 1; mkdir -p "${1%/*}" || exit 1; n=; [ -e "$1" ] || n=1; cat > "$1" || exit 1; [ -z "$n" ] || chmod "$2" "$1"`,
		[]string{name}, []string{strconv.FormatUint(uint64(perm.Perm()), 8)}, bytes.NewReader(data), io.Discard)
}

// ReadDir lists a directory. Entries are "dir" or "file" (a symlink is a
// file), as on local-process.
func (f *FS) ReadDir(ctx context.Context, name string) ([]sandbox.DirEntry, error) {
	var out bytes.Buffer
	err := f.script(ctx, "readdir", `chk 0 "$1" 1; [ -e "$1" ] || missing; cd "$1" || exit 1
for f in .* *; do
	case "$f" in .|..) continue ;; esac
	if [ -L "$f" ]; then t=f; elif [ -d "$f" ]; then t=d; elif [ -e "$f" ]; then t=f; else continue; fi
	printf '%s/%s\0' "$t" "$f"
done`, []string{name}, nil, nil, &out)
	if err != nil {
		return nil, err
	}
	base := strings.TrimRight(name, "/")
	var ents []sandbox.DirEntry
	for rec := range strings.SplitSeq(out.String(), "\x00") {
		t, n, ok := strings.Cut(rec, "/")
		if !ok {
			continue
		}
		typ := sandbox.EntryFile
		if t == "d" {
			typ = sandbox.EntryDir
		}
		ents = append(ents, sandbox.DirEntry{Name: n, Path: base + "/" + n, Type: typ})
	}
	return ents, nil
}

func (f *FS) MkdirAll(ctx context.Context, name string) error {
	return f.script(ctx, "mkdir", `chk 0 "$1" 1; mkdir -p "$1"`, []string{name}, nil, nil, io.Discard)
}

// RemoveAll removes a path recursively; a final symlink is removed, not
// followed. Removing the workspace root is refused.
func (f *FS) RemoveAll(ctx context.Context, name string) error {
	c, err := f.h.containerPath(name)
	if err != nil {
		return err
	}
	if c == f.h.root {
		return fmt.Errorf("docker: refusing to remove the workspace root")
	}
	return f.script(ctx, "remove", `chk 0 "$1" 0; rm -rf "$1"`, []string{name}, nil, nil, io.Discard)
}

func (f *FS) Rename(ctx context.Context, oldname, newname string) error {
	return f.script(ctx, "rename", `chk 0 "$1" 0; chk 1 "$2" 0; [ -e "$1" ] || [ -L "$1" ] || missing; mkdir -p "${2%/*}" && mv -f "$1" "$2"`,
		[]string{oldname, newname}, nil, nil, io.Discard)
}

func (f *FS) Exists(ctx context.Context, name string) (bool, error) {
	var out bytes.Buffer
	err := f.script(ctx, "exists", `chk 0 "$1" 1; if [ -e "$1" ]; then echo 1; else echo 0; fi`, []string{name}, nil, nil, &out)
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(out.String()) == "1", nil
}

// Lstat stats a path without following a final symlink; (nil, nil) means
// the path is confirmed missing.
func (f *FS) Lstat(ctx context.Context, name string) (*sandbox.FileInfo, error) {
	var out bytes.Buffer
	err := f.script(ctx, "lstat", `chk 0 "$1" 0; if [ -e "$1" ] || [ -L "$1" ]; then stat -c '%f %s %Y' "$1"; else echo missing; fi`,
		[]string{name}, nil, nil, &out)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(out.String())
	if s == "missing" {
		return nil, nil
	}
	var rawMode uint64
	var size, mtime int64
	if _, err := fmt.Sscanf(s, "%x %d %d", &rawMode, &size, &mtime); err != nil {
		return nil, fmt.Errorf("docker: lstat %s: unexpected stat output %q: %w", name, s, err)
	}
	mode := fs.FileMode(rawMode & 0o777)
	typ := sandbox.EntryOther
	switch rawMode & 0o170000 {
	case 0o100000:
		typ = sandbox.EntryFile
	case 0o040000:
		typ, mode = sandbox.EntryDir, mode|fs.ModeDir
	case 0o120000:
		typ, mode = sandbox.EntrySymlink, mode|fs.ModeSymlink
	case 0o010000:
		mode |= fs.ModeNamedPipe
	case 0o140000:
		mode |= fs.ModeSocket
	case 0o020000:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		mode |= fs.ModeDevice
	}
	return &sandbox.FileInfo{Type: typ, Mode: mode, Size: size, ModTime: time.Unix(mtime, 0)}, nil
}

// execDir maps and confines an exec working directory. The workspace root
// needs no check; any other directory is resolved in the container, which
// costs one extra exec.
func (h *Handle) execDir(ctx context.Context, dir string) (string, error) {
	if dir == "" {
		return h.root, nil
	}
	c, err := h.containerPath(dir)
	if err != nil {
		return "", err
	}
	if c == h.root {
		return c, nil
	}
	if err := h.fs.script(ctx, "chdir", `chk 0 "$1" 1; [ -d "$1" ] || missing`, []string{dir}, nil, nil, io.Discard); err != nil {
		return "", err
	}
	return c, nil
}
