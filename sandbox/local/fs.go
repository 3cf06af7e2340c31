package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/goai-sdk/goai/sandbox"
)

// resolve maps a virtual path to a host path inside the workspace.
//
// "/workspace" is the root and "/workspace/x" is root/x; any other absolute
// path "/x" is also re-rooted to root/x, and a relative path is joined to
// root. The result must stay inside the root lexically and after resolving
// symlinks: with follow, every component is resolved; without, all but the
// last (for Lstat, Remove and Rename, which act on a link itself).
func (h *Handle) resolve(p string, follow bool) (string, error) {
	rel := sandbox.RootRelative(p)
	host := filepath.Join(h.root, rel)
	if !within(h.root, host) {
		return "", h.outside(p)
	}
	check := host
	if !follow {
		if host == h.root {
			return host, nil
		}
		check = filepath.Dir(host)
	}
	real, err := h.realpath(check, 0)
	if err != nil {
		return "", err
	}
	if !within(h.realRoot, real) {
		return "", h.outside(p)
	}
	return host, nil
}

func (h *Handle) outside(p string) error {
	return &sandbox.PathError{Provider: Name, Path: p, Root: h.root, Err: sandbox.ErrOutsideRoot}
}

func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// realpath resolves the symlinks of the longest existing prefix of p and
// appends the missing rest. A dangling link is followed lexically.
func (h *Handle) realpath(p string, depth int) (string, error) {
	if depth > 40 {
		return "", fmt.Errorf("local: too many levels of symbolic links: %s", p)
	}
	existing, rest := p, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		// A dangling symlink: follow its target lexically.
		target, lerr := os.Readlink(existing)
		if lerr != nil {
			return "", fmt.Errorf("local: resolve %s: %w", p, err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(existing), target)
		}
		dir, err := h.realpath(filepath.Dir(target), depth+1)
		if err != nil {
			return "", err
		}
		real = filepath.Join(dir, filepath.Base(target))
	}
	return filepath.Join(real, rest), nil
}

// FS is the local filesystem of a handle. It implements sandbox.FS,
// sandbox.Lstater and sandbox.NativeWatcher.
type FS struct{ h *Handle }

func (f *FS) ReadFile(_ context.Context, name string) ([]byte, error) {
	p, err := f.h.resolve(name, true)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

func (f *FS) WriteFile(_ context.Context, name string, data []byte, perm fs.FileMode) error {
	p, err := f.h.resolve(name, true)
	if err != nil {
		return err
	}
	if perm == 0 {
		perm = 0o644
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, perm)
}

func (f *FS) ReadDir(_ context.Context, name string) ([]sandbox.DirEntry, error) {
	p, err := f.h.resolve(name, true)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	base := strings.TrimRight(name, "/")
	out := make([]sandbox.DirEntry, len(ents))
	for i, e := range ents {
		t := sandbox.EntryFile
		if e.IsDir() {
			t = sandbox.EntryDir
		}
		out[i] = sandbox.DirEntry{Name: e.Name(), Path: base + "/" + e.Name(), Type: t}
	}
	return out, nil
}

func (f *FS) MkdirAll(_ context.Context, name string) error {
	p, err := f.h.resolve(name, true)
	if err != nil {
		return err
	}
	return os.MkdirAll(p, 0o755)
}

func (f *FS) RemoveAll(_ context.Context, name string) error {
	p, err := f.h.resolve(name, false)
	if err != nil {
		return err
	}
	if p == f.h.root {
		return fmt.Errorf("local: refusing to remove the workspace root")
	}
	return os.RemoveAll(p)
}

func (f *FS) Rename(_ context.Context, oldname, newname string) error {
	o, err := f.h.resolve(oldname, false)
	if err != nil {
		return err
	}
	n, err := f.h.resolve(newname, false)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(n), 0o755); err != nil {
		return err
	}
	return os.Rename(o, n)
}

func (f *FS) Exists(_ context.Context, name string) (bool, error) {
	p, err := f.h.resolve(name, true)
	if err != nil {
		return false, err
	}
	_, err = os.Stat(p)
	if err == nil {
		return true, nil
	}
	if missing(err) {
		return false, nil
	}
	return false, err
}

// Lstat reports the path without following a final symlink; (nil, nil)
// means the path is confirmed missing.
func (f *FS) Lstat(_ context.Context, name string) (*sandbox.FileInfo, error) {
	p, err := f.h.resolve(name, false)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		if missing(err) {
			return nil, nil
		}
		return nil, err
	}
	t := sandbox.EntryOther
	switch m := fi.Mode(); {
	case m.IsRegular():
		t = sandbox.EntryFile
	case m.IsDir():
		t = sandbox.EntryDir
	case m&fs.ModeSymlink != 0:
		t = sandbox.EntrySymlink
	}
	return &sandbox.FileInfo{Type: t, Mode: fi.Mode(), Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
