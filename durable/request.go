package durable

import "context"

// RequestStore keeps the request that started a run (the client's
// RunAgentInput as received), so that a successor can drive a run whose
// producer died: the server rebuilds the run's options from it. Servers
// store only the requests of runs that can be taken over (a coding agent's,
// whose work outlives its host); the record goes with its run when the run
// is pruned.
type RequestStore interface {
	// SaveRequest stores body as runID's request, replacing any earlier one.
	SaveRequest(ctx context.Context, runID string, body []byte) error
	// LoadRequest returns runID's request, or an error wrapping
	// ErrRunNotFound when none was stored.
	LoadRequest(ctx context.Context, runID string) ([]byte, error)
}

// SaveRequest implements RequestStore.
func (m *Memory) SaveRequest(ctx context.Context, runID string, body []byte) error {
	if err := CheckRunID(runID); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.requests == nil {
		m.requests = map[string][]byte{}
	}
	m.requests[runID] = append([]byte(nil), body...)
	return nil
}

// LoadRequest implements RequestStore.
func (m *Memory) LoadRequest(ctx context.Context, runID string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.requests[runID]
	if !ok {
		return nil, ErrRunNotFound
	}
	return append([]byte(nil), b...), nil
}
