//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockOneProcess takes an exclusive lock on the database file for as long
// as the store is open (Options.OneProcess): a second process opening it
// so fails at once instead of writing beside this one unseen. The lock is
// flock(2)'s, which SQLite's own POSIX record locks do not touch.
func lockOneProcess(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("durable/sqlite: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("durable/sqlite: %s is open in another process or store (Options.OneProcess): %w", path, ErrInUse)
		}
		return nil, fmt.Errorf("durable/sqlite: lock %s: %w", path, err)
	}
	return f, nil
}
