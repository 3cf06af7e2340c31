package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/goai-sdk/goai/sandbox"
)

// Snapshots of the local provider are content-addressed: every file's
// content is stored once as a blob named by its SHA-256 under
// <SnapshotDir>/blobs, and a snapshot is a manifest (paths, modes, blob
// names, symlink targets) named by the SHA-256 of its own bytes. Left out,
// at any depth: .git, node_modules, files and directories whose name
// starts with .env, CLAUDE.md and GEMINI.md (links bootstrap re-creates)
// and the projection markers (.tanstack-projected-*). The values of the
// handle environment (the sandbox's secrets) are redacted from every file
// to NUL bytes of the same length. Restore copies the files into a new
// sandbox directory: a snapshot never becomes a live workspace itself.

// snapshotExcluded reports whether a file or directory name is left out of
// snapshots.
func snapshotExcluded(name string) bool {
	switch name {
	case ".git", "node_modules", "CLAUDE.md", "GEMINI.md":
		return true
	}
	return strings.HasPrefix(name, ".env") || strings.HasPrefix(name, ".tanstack-projected-")
}

// minSecretLen is the shortest environment value that is redacted: shorter
// ones ("1", "on") would blank out ordinary text.
const minSecretLen = 6

type manifest struct {
	Label   string          `json:"label,omitempty"`
	Created time.Time       `json:"created"`
	Entries []manifestEntry `json:"entries"`
}

type manifestEntry struct {
	Path   string      `json:"path"` // slash-separated, relative to the root
	Mode   fs.FileMode `json:"mode"`
	Blob   string      `json:"blob,omitempty"`   // files
	Target string      `json:"target,omitempty"` // symlinks
}

var snapshotIDPattern = regexp.MustCompile(`^local-[0-9a-f]{64}$`)

// SnapshotDir is where snapshots are stored.
func (p *Provider) SnapshotDir() string {
	if p.opts.SnapshotDir != "" {
		return p.opts.SnapshotDir
	}
	return filepath.Join(p.BaseDir(), ".snapshots")
}

// Snapshot stores the workspace (see the exclusions above) and returns its
// id, "local-<sha256 of the manifest>".
func (h *Handle) Snapshot(ctx context.Context, label string) (sandbox.Snapshot, error) {
	dir := h.p.SnapshotDir()
	blobs := filepath.Join(dir, "blobs")
	if err := os.MkdirAll(blobs, 0o700); err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("local: snapshot: %w", err)
	}
	secrets := h.secretValues()
	m := manifest{Label: label, Created: time.Now().UTC()}
	err := filepath.WalkDir(h.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if path == h.root {
			return nil
		}
		if snapshotExcluded(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(h.root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			m.Entries = append(m.Entries, manifestEntry{Path: rel, Mode: fs.ModeDir | info.Mode().Perm()})
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			m.Entries = append(m.Entries, manifestEntry{Path: rel, Mode: fs.ModeSymlink, Target: target})
		case d.Type().IsRegular():
			sum, err := storeBlob(blobs, path, secrets)
			if err != nil {
				return err
			}
			m.Entries = append(m.Entries, manifestEntry{Path: rel, Mode: info.Mode().Perm(), Blob: sum})
		default:
			// Sockets, devices and pipes are not content.
		}
		return nil
	})
	if err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("local: snapshot %s: %w", h.root, err)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("local: snapshot: %w", err)
	}
	sum := sha256.Sum256(data)
	id := "local-" + hex.EncodeToString(sum[:])
	if err := writeAtomic(filepath.Join(dir, id+".json"), data); err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("local: snapshot: %w", err)
	}
	return sandbox.Snapshot{ID: id, Label: label}, nil
}

// secretValues are the handle environment's values worth redacting.
func (h *Handle) secretValues() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out [][]byte
	for _, v := range h.env {
		if len(v) >= minSecretLen {
			out = append(out, []byte(v))
		}
	}
	// Longest first, so a secret containing another is redacted whole.
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// storeBlob stores the (redacted) content of path and returns its hash.
func storeBlob(blobs, path string, secrets [][]byte) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, s := range secrets {
		if bytes.Contains(data, s) {
			data = bytes.ReplaceAll(data, s, make([]byte, len(s)))
		}
	}
	sum := sha256.Sum256(data)
	name := hex.EncodeToString(sum[:])
	dst := filepath.Join(blobs, name)
	if _, err := os.Stat(dst); err == nil {
		return name, nil // content-addressed: already stored
	}
	return name, writeAtomic(dst, data)
}

// writeAtomic writes data to a temporary file and renames it into place.
func writeAtomic(dst string, data []byte) error {
	tmp := dst + ".tmp-" + randomHex(6)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ErrUnknownSnapshot is returned for a snapshot id the provider does not
// have.
var ErrUnknownSnapshot = errors.New("local: unknown snapshot")

// RestoreSnapshot creates a new sandbox (a new directory under BaseDir,
// whatever Options.Dir says) holding the snapshot's files.
func (p *Provider) RestoreSnapshot(ctx context.Context, opts sandbox.RestoreOptions) (sandbox.Handle, error) {
	if !snapshotIDPattern.MatchString(opts.SnapshotID) {
		return nil, fmt.Errorf("%w: %q", ErrUnknownSnapshot, opts.SnapshotID)
	}
	dir := p.SnapshotDir()
	data, err := os.ReadFile(filepath.Join(dir, opts.SnapshotID+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q", ErrUnknownSnapshot, opts.SnapshotID)
	}
	if err != nil {
		return nil, fmt.Errorf("local: restore: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("local: restore %s: bad manifest: %w", opts.SnapshotID, err)
	}
	root := filepath.Join(p.BaseDir(), randomHex(12))
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("local: restore: %w", err)
	}
	if err := restoreEntries(ctx, root, filepath.Join(dir, "blobs"), m.Entries); err != nil {
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("local: restore %s: %w", opts.SnapshotID, err)
	}
	h, err := p.newHandle(root)
	if err != nil {
		_ = os.RemoveAll(root)
		return nil, err
	}
	if len(opts.Env) > 0 {
		_ = h.SetEnv(opts.Env)
	}
	return h, nil
}

func restoreEntries(ctx context.Context, root, blobs string, entries []manifestEntry) error {
	var dirs []manifestEntry
	for _, e := range entries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A manifest is our own file, but a path must still stay inside.
		if e.Path == "" || strings.HasPrefix(e.Path, "/") || !filepath.IsLocal(filepath.FromSlash(e.Path)) {
			return fmt.Errorf("bad path %q in the manifest", e.Path)
		}
		dst := filepath.Join(root, filepath.FromSlash(e.Path))
		switch {
		case e.Mode.IsDir():
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			dirs = append(dirs, e)
		case e.Mode&fs.ModeSymlink != 0:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(e.Target, dst); err != nil {
				return err
			}
		default:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := copyBlob(filepath.Join(blobs, e.Blob), dst, e.Mode.Perm()); err != nil {
				return err
			}
		}
	}
	for _, d := range dirs { // after their contents: a read-only directory is filled first
		if err := os.Chmod(filepath.Join(root, filepath.FromSlash(d.Path)), d.Mode.Perm()); err != nil {
			return err
		}
	}
	return nil
}

func copyBlob(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, perm) // the umask narrowed it
}

// DeleteSnapshot removes a snapshot's manifest. Blobs are shared between
// snapshots and kept.
func (p *Provider) DeleteSnapshot(_ context.Context, id string) error {
	if !snapshotIDPattern.MatchString(id) {
		return fmt.Errorf("%w: %q", ErrUnknownSnapshot, id)
	}
	err := os.Remove(filepath.Join(p.SnapshotDir(), id+".json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local: delete snapshot: %w", err)
	}
	return nil
}

// Fork snapshots the workspace and restores it into a new sandbox.
func (h *Handle) Fork(ctx context.Context) (sandbox.Handle, error) {
	h.mu.Lock()
	env := maps.Clone(h.env)
	h.mu.Unlock()
	return sandbox.ForkBySnapshot(ctx, h, h.p, env)
}
