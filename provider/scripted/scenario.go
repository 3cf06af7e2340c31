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
}

// LoadFile reads and parses a scenario file.
func LoadFile(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	sc, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return sc, nil
}

// Parse decodes a scenario. The turns are decoded with the streaming
// event decoder, so a large script costs one pass over its bytes.
func Parse(data []byte) (*Scenario, error) {
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
			if err := parseTurns(s, sc); err != nil {
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
	case "structured":
		sc.Structured = &Structured{}
		return json.Unmarshal(raw, sc.Structured)
	}
	return nil
}

func parseTurns(s *jsonlex.Scanner, sc *Scenario) error {
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
			if err := agui.DecodeEvent(s, &it.Event); err != nil {
				return fmt.Errorf("turns[%d][%d]: %w", ti, ci, err)
			}
			if it.Event.Type == "" {
				d, ok := it.Event.Extra["delayMs"]
				if !ok {
					return fmt.Errorf("turns[%d][%d]: a chunk needs a string \"type\" (or be {\"delayMs\": N})", ti, ci)
				}
				if err := json.Unmarshal(d, &it.Delay); err != nil || it.Delay < 0 {
					return fmt.Errorf("turns[%d][%d]: delayMs must be a non-negative integer", ti, ci)
				}
				it.Event = agui.Event{}
				if it.Delay == 0 {
					continue
				}
			}
			turn = append(turn, it)
		}
		sc.Turns = append(sc.Turns, turn)
	}
}
