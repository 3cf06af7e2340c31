package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/goai-sdk/goai/agui"
)

// DiscoveryToolName is the tool the model calls to discover lazy tools.
const DiscoveryToolName = "__lazy__tool__discovery__"

// LazyTools configures how lazy tools are advertised.
type LazyTools struct {
	// IncludeDescription is "none" (default), "first-sentence" or "full":
	// how much of each lazy tool's description the discovery tool lists.
	IncludeDescription string
}

// lazyManager withholds Lazy tools until the model discovers them
// (docs/engine.md §8). Discovery is recovered from history, so it survives
// across requests.
type lazyManager struct {
	eager      []*Tool
	lazy       map[string]*Tool
	order      []string
	discovered map[string]bool
	fresh      bool // discovered something since the last active()
	discovery  *Tool
}

func newLazyManager(tools []*Tool, history []agui.ModelMessage, cfg LazyTools) *lazyManager {
	m := &lazyManager{lazy: map[string]*Tool{}, discovered: map[string]bool{}}
	for _, t := range tools {
		if t.Lazy {
			m.lazy[t.Name] = t
			m.order = append(m.order, t.Name)
		} else {
			m.eager = append(m.eager, t)
		}
	}
	if len(m.lazy) == 0 {
		return nil
	}
	m.scan(history)
	m.discovery = m.discoveryTool(cfg.IncludeDescription)
	return m
}

func (m *lazyManager) scan(history []agui.ModelMessage) {
	calls := map[string]bool{}
	for _, msg := range history {
		for _, tc := range msg.ToolCalls {
			if tc.Function.Name == DiscoveryToolName {
				calls[tc.ID] = true
			}
		}
	}
	for _, msg := range history {
		if msg.Role != agui.RoleTool || !calls[msg.ToolCallID] {
			continue
		}
		var res struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if json.Unmarshal([]byte(msg.Content.String()), &res) == nil {
			for _, t := range res.Tools {
				if m.lazy[t.Name] != nil {
					m.discovered[t.Name] = true
				}
			}
		}
	}
}

// active returns the tools to advertise now.
func (m *lazyManager) active() []*Tool {
	m.fresh = false
	out := append([]*Tool(nil), m.eager...)
	for _, name := range m.order {
		if m.discovered[name] {
			out = append(out, m.lazy[name])
		}
	}
	if len(m.discovered) < len(m.lazy) {
		out = append(out, m.discovery)
	}
	return out
}

func (m *lazyManager) undiscovered(name string) bool {
	return m != nil && m.lazy[name] != nil && !m.discovered[name]
}

func undiscoveredError(name string) string {
	return fmt.Sprintf("Error: Tool '%s' must be discovered first. Call %s with toolNames: ['%s'] to discover it.", name, DiscoveryToolName, name)
}

var firstSentenceRE = regexp.MustCompile(`^.*?[.!?](\s|$)`)

func catalogEntry(t *Tool, include string) string {
	desc := strings.TrimSpace(t.Description)
	if include == "" || include == "none" || desc == "" {
		return t.Name
	}
	if include == "first-sentence" {
		if m := firstSentenceRE.FindString(desc); m != "" {
			desc = strings.TrimSpace(m)
		}
	}
	return t.Name + " — " + desc
}

func (m *lazyManager) discoveryTool(include string) *Tool {
	entries := make([]string, len(m.order))
	for i, name := range m.order {
		entries[i] = catalogEntry(m.lazy[name], include)
	}
	desc := "You have access to additional tools that can be discovered. Available tools: [" + strings.Join(entries, ", ") +
		"]. Call this tool with a list of tool names to discover their full descriptions and argument schemas before using them."
	return &Tool{
		Name:        DiscoveryToolName,
		Description: desc,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"toolNames":{"type":"array","items":{"type":"string"},"description":"List of tool names to discover. Each name must match one of the available tools."}},"required":["toolNames"]}`),
		Execute:     m.discover,
	}
}

// discover is the discovery tool: it returns the named tools' schemas and
// advertises them from the next turn.
func (m *lazyManager) discover(_ context.Context, args json.RawMessage) (any, error) {
	var in struct {
		ToolNames []string `json:"toolNames"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, fmt.Errorf("toolNames must be a list of tool names: %w", err)
	}
	type found struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	}
	tools := []found{}
	var errs []string
	for _, name := range in.ToolNames {
		t := m.lazy[name]
		if t == nil {
			errs = append(errs, fmt.Sprintf("Unknown tool: '%s'. Available tools: [%s]", name, strings.Join(m.undiscoveredNames(), ", ")))
			continue
		}
		if !m.discovered[name] {
			m.discovered[name] = true
			m.fresh = true
		}
		tools = append(tools, found{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	out := map[string]any{"tools": tools}
	if len(errs) > 0 {
		out["errors"] = errs
	}
	return out, nil
}

// undiscoveredNames lists the lazy tools not yet discovered, in order.
func (m *lazyManager) undiscoveredNames() []string {
	var left []string
	for _, n := range m.order {
		if !m.discovered[n] {
			left = append(left, n)
		}
	}
	return left
}
