package toolcache

import (
	"container/list"
	"context"
	"sync"
)

// Memory is an in-memory LRU Storage: Get refreshes an entry, Set of a new
// key evicts the least recently used entry once MaxSize is reached.
type Memory struct {
	mu    sync.Mutex
	max   int
	ll    *list.List // front = most recently used
	items map[string]*list.Element
}

type memItem struct {
	key string
	e   Entry
}

// NewMemory returns an LRU store holding at most maxSize entries (0 or
// less means DefaultMaxSize).
func NewMemory(maxSize int) *Memory {
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	return &Memory{max: maxSize, ll: list.New(), items: map[string]*list.Element{}}
}

// Get implements Storage.
func (m *Memory) Get(_ context.Context, key string) (Entry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.items[key]
	if !ok {
		return Entry{}, false, nil
	}
	m.ll.MoveToFront(el)
	return el.Value.(*memItem).e, true, nil
}

// Set implements Storage.
func (m *Memory) Set(_ context.Context, key string, e Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.items[key]; ok {
		el.Value.(*memItem).e = e
		m.ll.MoveToFront(el)
		return nil
	}
	for m.ll.Len() >= m.max {
		oldest := m.ll.Back()
		m.ll.Remove(oldest)
		delete(m.items, oldest.Value.(*memItem).key)
	}
	m.items[key] = m.ll.PushFront(&memItem{key: key, e: e})
	return nil
}

// Delete implements Storage.
func (m *Memory) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.items[key]; ok {
		m.ll.Remove(el)
		delete(m.items, key)
	}
	return nil
}

// Len reports how many entries the store holds.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ll.Len()
}

var _ Storage = (*Memory)(nil)
