// Package scripted is a deterministic model adapter driven by a scenario
// file: turn N is what the model yields on its N-th call. It backs the
// tests, the benchmarks and the offline demo of goai serve.
package scripted

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/internal/jsonlex"
)

// Item is one step of a turn: an adapter chunk, or a pause.
type Item struct {
	Event agui.Event
	Delay int // milliseconds; when > 0 the item is a pause, not a chunk
}

// Structured is what the structured-output call returns or raises.
type Structured struct {
	Raw   *string          `json:"raw,omitempty"`
	Usage *agui.TokenUsage `json:"usage,omitempty"`
	Error string           `json:"error,omitempty"`
}

// Scenario is a scripted conversation.
type Scenario struct {
	Name          string
	ThreadID      string
	RunID         string
	ParentRunID   string
	Resume        []chat.ResumeItem
	State         json.RawMessage
	Messages      []agui.ModelMessage
	SystemPrompts []chat.SystemPrompt
	Tools         []string
	Middleware    []string
	MaxIterations int
	OutputSchema  json.RawMessage
	Structured    *Structured
	Turns         [][]Item
	// Cycle starts the turns over after the last one instead of answering
	// "script exhausted": a handful of turns serve a load test of any length.
	Cycle bool
	// StampYield sets each chunk's timestamp to the wall clock (ms) at the
	// moment the adapter yields it, so a client can measure delivery latency
	// from the model's yield to its read.
	StampYield bool

	lazyTurns [][]byte // set instead of Turns by LoadFileLazy: each turn's JSON array
}

// NumTurns is the number of scripted model turns.
func (sc *Scenario) NumTurns() int {
	if sc.lazyTurns != nil {
		return len(sc.lazyTurns)
	}
	return len(sc.Turns)
}

// LoadFile reads and parses a scenario file.
func LoadFile(path string) (*Scenario, error) { return loadFile(path, false) }

// LoadFileLazy is LoadFile for large scripts: each turn's JSON syntax is
// checked now, but its chunks are kept as text and decoded as they are
// replayed, so a script costs its own size in memory and one pass to load.
// A chunk that is valid JSON but not a valid chunk (no "type", a bad
// delayMs, a field of the wrong type) is reported when its turn is replayed,
// as an error naming the turn and chunk.
func LoadFileLazy(path string) (*Scenario, error) { return loadFile(path, true) }

func loadFile(path string, lazy bool) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	sc, err := parse(data, lazy)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return sc, nil
}

// Parse decodes a scenario. The turns are decoded with the streaming
// event decoder, so a large script costs one pass over its bytes.
func Parse(data []byte) (*Scenario, error) { return parse(data, false) }

func parse(data []byte, lazy bool) (*Scenario, error) {
	sc := &Scenario{}
	s := jsonlex.New(data)
	if err := s.ObjectStart(); err != nil {
		return nil, err
	}
	for first := true; ; first = false {
		key, ok, err := s.NextKey(first)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		k := string(key)
		if k == "turns" {
			if err := parseTurns(s, sc, lazy); err != nil {
				return nil, err
			}
			continue
		}
		raw, err := s.Raw()
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		if err := sc.setField(k, raw); err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
	}
	if !s.AtEOF() {
		return nil, fmt.Errorf("trailing data at offset %d", s.Pos())
	}
	return sc, nil
}

func (sc *Scenario) setField(k string, raw []byte) error {
	if string(raw) == "null" {
		return nil
	}
	switch k {
	case "name":
		return json.Unmarshal(raw, &sc.Name)
	case "threadId":
		return json.Unmarshal(raw, &sc.ThreadID)
	case "runId":
		return json.Unmarshal(raw, &sc.RunID)
	case "parentRunId":
		return json.Unmarshal(raw, &sc.ParentRunID)
	case "resume":
		return json.Unmarshal(raw, &sc.Resume)
	case "state":
		sc.State = append(json.RawMessage(nil), raw...)
	case "messages":
		return json.Unmarshal(raw, &sc.Messages)
	case "systemPrompts":
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return err
		}
		for _, it := range items {
			var s string
			if json.Unmarshal(it, &s) == nil {
				sc.SystemPrompts = append(sc.SystemPrompts, chat.SystemPrompt{Content: s})
				continue
			}
			var p chat.SystemPrompt
			if err := json.Unmarshal(it, &p); err != nil {
				return err
			}
			sc.SystemPrompts = append(sc.SystemPrompts, p)
		}
	case "tools":
		return json.Unmarshal(raw, &sc.Tools)
	case "middleware":
		return json.Unmarshal(raw, &sc.Middleware)
	case "maxIterations":
		return json.Unmarshal(raw, &sc.MaxIterations)
	case "outputSchema":
		sc.OutputSchema = append(json.RawMessage(nil), raw...)
	case "cycle":
		return json.Unmarshal(raw, &sc.Cycle)
	case "stampYield":
		return json.Unmarshal(raw, &sc.StampYield)
	case "structured":
		sc.Structured = &Structured{}
		return json.Unmarshal(raw, sc.Structured)
	}
	return nil
}

func parseTurns(s *jsonlex.Scanner, sc *Scenario, lazy bool) error {
	if lazy {
		sc.lazyTurns = [][]byte{}
	}
	if err := s.ArrayStart(); err != nil {
		return fmt.Errorf("turns: %w", err)
	}
	for ti, firstTurn := 0, true; ; ti, firstTurn = ti+1, false {
		ok, err := s.NextElem(firstTurn)
		if err != nil {
			return fmt.Errorf("turns: %w", err)
		}
		if !ok {
			return nil
		}
		if lazy {
			// One pass checks the whole turn's syntax; its chunks are
			// decoded as they are replayed.
			start := s.Pos()
			raw, err := s.Raw()
			if err != nil {
				return fmt.Errorf("turns[%d]: %w", ti, err)
			}
			if len(raw) == 0 || raw[0] != '[' {
				return fmt.Errorf("turns[%d] at offset %d: a turn must be a JSON array", ti, start)
			}
			sc.lazyTurns = append(sc.lazyTurns, raw)
			continue
		}
		if err := s.ArrayStart(); err != nil {
			return fmt.Errorf("turns[%d]: %w", ti, err)
		}
		var turn []Item
		for ci, first := 0, true; ; ci, first = ci+1, false {
			ok, err := s.NextElem(first)
			if err != nil {
				return fmt.Errorf("turns[%d]: %w", ti, err)
			}
			if !ok {
				break
			}
			var it Item
			raw, err := s.Raw()
			if err == nil {
				err = agui.DecodeEvent(raw, &it.Event)
			}
			if err != nil {
				return fmt.Errorf("turns[%d][%d]: %w", ti, ci, err)
			}
			if it.Event.Type == "" {
				d, err := delayOf(&it.Event)
				if err != nil {
					return fmt.Errorf("turns[%d][%d]: %w", ti, ci, err)
				}
				if d == 0 {
					continue
				}
				it = Item{Delay: d}
			}
			turn = append(turn, it)
		}
		sc.Turns = append(sc.Turns, turn)
	}
}

// delayOf reads the delay of a chunk without a type, which must be
// {"delayMs": N}.
func delayOf(e *agui.Event) (int, error) {
	d, ok := e.Extra["delayMs"]
	if !ok {
		return 0, fmt.Errorf("a chunk needs a string \"type\" (or be {\"delayMs\": N})")
	}
	var ms int
	if err := json.Unmarshal(d, &ms); err != nil || ms < 0 {
		return 0, fmt.Errorf("delayMs must be a non-negative integer")
	}
	return ms, nil
}
