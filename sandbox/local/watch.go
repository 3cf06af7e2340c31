package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"

	"github.com/goai-sdk/goai/sandbox"
)

// Watch watches root recursively with inotify. New directories are watched
// as they appear and the files already in them are reported as RawCreate;
// a renamed or removed directory's watch is dropped; a kernel queue
// overflow is reported as RawOverflow (after re-adding every directory) and
// a failure to add a watch (e.g. ENOSPC) as RawFailed.
func (f *FS) Watch(ctx context.Context, root string, opts sandbox.NativeWatchOptions, fn func(sandbox.RawEvent)) (sandbox.Subscription, error) {
	hostRoot, err := f.h.resolve(root, true)
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewBufferedWatcher(1024)
	if err != nil {
		return nil, fmt.Errorf("local: watch: %w", err)
	}
	rw := &recWatch{
		w: w, fn: fn, hostRoot: hostRoot, virtRoot: strings.TrimRight(root, "/"),
		ignore: map[string]bool{}, dirs: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{}),
	}
	for _, ig := range opts.Ignore {
		rw.ignore[ig] = true
	}
	if err := rw.addTree(hostRoot, false); err != nil {
		w.Close()
		return nil, fmt.Errorf("local: watch %s: %w", root, err)
	}
	go rw.run()
	return rw, nil
}

type recWatch struct {
	w        *fsnotify.Watcher
	fn       func(sandbox.RawEvent)
	hostRoot string
	virtRoot string
	ignore   map[string]bool
	dirs     map[string]bool // watched host directories (owned by run after start)
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	stopErr  error
}

func (r *recWatch) virtual(host string) string {
	rel, err := filepath.Rel(r.hostRoot, host)
	if err != nil || rel == "." {
		return r.virtRoot
	}
	return r.virtRoot + "/" + filepath.ToSlash(rel)
}

// addTree watches dir and every directory below it. With synth, every file
// found is reported as RawCreate: it may have been created before its
// directory's watch existed.
func (r *recWatch) addTree(dir string, synth bool) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, fs.ErrNotExist) {
				return nil // vanished while walking
			}
			if p == dir && errors.Is(err, fs.ErrNotExist) && synth {
				return filepath.SkipAll
			}
			return err
		}
		if p != dir && r.ignore[d.Name()] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if err := r.w.Add(p); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return filepath.SkipDir
				}
				return err
			}
			r.dirs[p] = true
			if synth && p != dir {
				r.fn(sandbox.RawEvent{Op: sandbox.RawCreate, Path: r.virtual(p)})
			}
			return nil
		}
		if synth {
			r.fn(sandbox.RawEvent{Op: sandbox.RawCreate, Path: r.virtual(p)})
		}
		return nil
	})
}

func (r *recWatch) dropTree(dir string) {
	prefix := dir + string(filepath.Separator)
	for d := range r.dirs {
		if d == dir || strings.HasPrefix(d, prefix) {
			_ = r.w.Remove(d)
			delete(r.dirs, d)
		}
	}
}

func (r *recWatch) run() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case ev, ok := <-r.w.Events:
			if !ok {
				return
			}
			r.handle(ev)
		case err, ok := <-r.w.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				if aerr := r.addTree(r.hostRoot, false); aerr != nil {
					r.fn(sandbox.RawEvent{Op: sandbox.RawFailed, Err: aerr})
					return
				}
				r.fn(sandbox.RawEvent{Op: sandbox.RawOverflow})
				continue
			}
			// Unknown watcher errors: events may be missing, so rescan.
			r.fn(sandbox.RawEvent{Op: sandbox.RawOverflow, Err: err})
		}
	}
}

func (r *recWatch) handle(ev fsnotify.Event) {
	var op sandbox.RawOp
	switch {
	case ev.Has(fsnotify.Create):
		op = sandbox.RawCreate
	case ev.Has(fsnotify.Write):
		op = sandbox.RawWrite
	case ev.Has(fsnotify.Remove):
		op = sandbox.RawRemove
	case ev.Has(fsnotify.Rename):
		op = sandbox.RawRename
	default:
		op = sandbox.RawChmod
	}
	if op == sandbox.RawRemove || op == sandbox.RawRename {
		if r.dirs[ev.Name] {
			r.dropTree(ev.Name)
		}
	}
	r.fn(sandbox.RawEvent{Op: op, Path: r.virtual(ev.Name)})
	if op == sandbox.RawCreate && !r.ignore[filepath.Base(ev.Name)] {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			if err := r.addTree(ev.Name, true); err != nil {
				r.fn(sandbox.RawEvent{Op: sandbox.RawFailed, Err: fmt.Errorf("watch %s: %w", ev.Name, err)})
			}
		}
	}
}

// Stop ends the watch; fn is not called after it returns.
func (r *recWatch) Stop() error {
	r.stopOnce.Do(func() {
		close(r.stop)
		<-r.done
		r.stopErr = r.w.Close()
	})
	return r.stopErr
}
