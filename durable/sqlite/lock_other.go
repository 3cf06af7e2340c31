//go:build !unix

package sqlite

import "os"

// lockOneProcess is a no-op where flock(2) is missing: Options.OneProcess
// then promises nothing, and readers query as without it.
func lockOneProcess(path string) (*os.File, error) { return nil, nil }
