package sandbox

import (
	"context"
	"sync"
	"time"
)

// Record is what the instance store keeps per sandbox key.
type Record struct {
	Key               string
	Provider          string
	ProviderSandboxID string
	LatestSnapshotID  string
	ThreadID          string
	LatestRunID       string
	UpdatedAt         time.Time
}

// InstanceStore persists sandbox records. Get returns (nil, nil) for a
// missing key; Upsert fully replaces a record; Delete of a missing key is a
// no-op. There is deliberately no List.
type InstanceStore interface {
	Get(ctx context.Context, key string) (*Record, error)
	Upsert(ctx context.Context, rec Record) error
	Delete(ctx context.Context, key string) error
}

// MemoryStore is an in-memory InstanceStore. The zero value is ready.
type MemoryStore struct {
	mu   sync.Mutex
	recs map[string]Record
}

func (s *MemoryStore) Get(_ context.Context, key string) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[key]
	if !ok {
		return nil, nil
	}
	return &r, nil
}

func (s *MemoryStore) Upsert(_ context.Context, rec Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs == nil {
		s.recs = make(map[string]Record)
	}
	s.recs[rec.Key] = rec
	return nil
}

func (s *MemoryStore) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.recs, key)
	return nil
}

// Locker serializes work per key.
type Locker interface {
	WithLock(ctx context.Context, key string, fn func(ctx context.Context) error) error
}

// MemoryLocks is an in-process Locker. The zero value is ready.
type MemoryLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{}
	refs int
}

func (l *MemoryLocks) WithLock(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = make(map[string]*keyLock)
	}
	kl := l.locks[key]
	if kl == nil {
		kl = &keyLock{ch: make(chan struct{}, 1)}
		l.locks[key] = kl
	}
	kl.refs++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		kl.refs--
		if kl.refs == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}()
	select {
	case kl.ch <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-kl.ch }()
	return fn(ctx)
}
