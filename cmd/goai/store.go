package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/goai-sdk/goai/durable"
	"github.com/goai-sdk/goai/durable/postgres"
	"github.com/goai-sdk/goai/durable/sqlite"
)

// openStore opens the run store named by spec: sqlite:PATH (the embedded
// default), postgres://... for many replicas, or none.
func openStore(ctx context.Context, spec string) (durable.Store, func(), error) {
	switch {
	case spec == "" || spec == "none":
		return nil, func() {}, nil
	case strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://"):
		st, err := postgres.Open(ctx, spec, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("opening Postgres store %s: %w", redactURL(spec), err)
		}
		return st, func() { _ = st.Shutdown() }, nil
	case strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, nil, fmt.Errorf("creating the store directory: %w", err)
		}
		st, err := sqlite.Open(path, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("opening SQLite store %s: %w", path, err)
		}
		return st, func() { _ = st.Shutdown() }, nil
	}
	return nil, nil, fmt.Errorf("unknown store %q: use sqlite:PATH, postgres://... or none", spec)
}

// redactURL hides a password in a store URL for logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
