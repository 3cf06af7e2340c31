package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf16"
)

// Tenant scopes a sandbox key.
type Tenant struct {
	UserID string `json:"userId,omitempty"`
	OrgID  string `json:"orgId,omitempty"`
}

// RunContext identifies the run a sandbox is ensured for.
type RunContext struct {
	ThreadID string
	RunID    string
	// Store and Locks default to the Sandbox's own in-memory ones.
	Store   InstanceStore
	Locks   Locker
	Tenant  *Tenant
	Adapter string
}

// canonical is JSON with keys sorted at every level (maps marshal sorted).
func canonical(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("sandbox: canonical: %v", err)) // only maps, slices and strings are encoded
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// fnv64 is two 32-bit FNV-1a lanes over the UTF-16 code units of s: lane 1
// takes the low byte and lane 2 the high byte of each unit.
func fnv64(s string) string {
	const offset, prime = 0x811c9dc5, 0x01000193
	h1, h2 := uint32(offset), uint32(offset)
	for _, r := range s {
		units := []uint16{uint16(r)}
		if r >= 0x10000 {
			a, b := utf16.EncodeRune(r)
			units = []uint16{uint16(a), uint16(b)}
		}
		for _, u := range units {
			h1 = (h1 ^ uint32(u&0xff)) * prime
			h2 = (h2 ^ uint32(u>>8)) * prime
		}
	}
	return fmt.Sprintf("%08x%08x", h1, h2)
}

// workspaceHash hashes the workspace without its secret values.
func workspaceHash(w *Workspace) string {
	if w == nil {
		return fnv64("no-workspace")
	}
	src := map[string]any{"type": string(w.Source.Kind)}
	if w.Source.Kind == "" {
		src["type"] = "none"
	}
	if w.Source.Path != "" {
		src["path"] = w.Source.Path
	}
	if w.Source.URL != "" {
		src["url"] = w.Source.URL
	}
	if w.Source.Ref != "" {
		src["ref"] = w.Source.Ref
	}
	if w.Source.Depth != 0 {
		src["depth"] = w.Source.Depth
	}
	setup := make([]any, 0, len(w.Setup))
	for _, s := range w.Setup {
		if s.Parallel {
			setup = append(setup, map[string]any{"parallel": s.Commands})
		} else {
			setup = append(setup, s.Commands)
		}
	}
	m := map[string]any{
		"source":  src,
		"setup":   setup,
		"root":    w.root(),
		"secrets": w.Secrets.Names(), // names only: a changed value keeps the key
	}
	if len(w.Env) > 0 {
		m["env"] = w.Env
	}
	if len(w.Scripts) > 0 {
		m["scripts"] = w.Scripts
	}
	if w.Instructions != "" {
		m["instructions"] = w.Instructions
	}
	if w.PackageManager != "" {
		m["packageManager"] = w.PackageManager
	}
	return fnv64(canonical(m))
}
