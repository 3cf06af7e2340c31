package chat

import (
	"encoding/json"
	"maps"
	"slices"
)

// nullWidening records where strictSchema added "null" to an optional
// property, so the engine can drop exactly those nulls from the result.
type nullWidening struct {
	widened    bool
	properties map[string]*nullWidening
	items      *nullWidening
}

func (n *nullWidening) empty() bool {
	return n == nil || (!n.widened && len(n.properties) == 0 && n.items == nil)
}

// strictSchema makes a JSON Schema acceptable to strict structured-output
// modes: every object property required, no additional properties, and
// originally optional properties widened with "null". Non-object schemas
// are returned unchanged.
func strictSchema(raw json.RawMessage) (json.RawMessage, *nullWidening) {
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return raw, nil
	}
	out, nw := strictObject(s, requiredOf(s))
	b, err := marshalCompact(out)
	if err != nil {
		return raw, nil
	}
	if nw.empty() {
		nw = nil
	}
	return b, nw
}

func requiredOf(s map[string]any) []string {
	var req []string
	if list, ok := s["required"].([]any); ok {
		for _, r := range list {
			if name, ok := r.(string); ok {
				req = append(req, name)
			}
		}
	}
	return req
}

func strictObject(s map[string]any, required []string) (map[string]any, *nullWidening) {
	out := make(map[string]any, len(s)+2)
	for k, v := range s {
		out[k] = v
	}
	nw := &nullWidening{}
	if props, isObj := s["properties"].(map[string]any); s["type"] == "object" && isObj {
		out["properties"], out["required"], nw.properties = strictProperties(props, required)
		out["additionalProperties"] = false
	}
	if s["type"] == "array" && s["items"] != nil {
		items, im := strictItems(s["items"])
		out["items"] = items
		if !im.empty() {
			nw.items = im
		}
	}
	return out, nw
}

// strictProperties makes every property required and strict, and records
// where optional ones were widened with null.
func strictProperties(props map[string]any, required []string) (map[string]any, []any, map[string]*nullWidening) {
	out := make(map[string]any, len(props))
	names := make([]any, 0, len(props))
	var widenings map[string]*nullWidening
	for _, name := range slices.Sorted(maps.Keys(props)) {
		names = append(names, name)
		prop, ok := props[name].(map[string]any)
		if !ok {
			out[name] = props[name]
			continue
		}
		var nw *nullWidening
		out[name], nw = strictProperty(prop, !slices.Contains(required, name))
		if !nw.empty() {
			if widenings == nil {
				widenings = map[string]*nullWidening{}
			}
			widenings[name] = nw
		}
	}
	return out, names, widenings
}

// strictProperty makes one property's schema strict; an optional one also
// accepts null.
func strictProperty(prop map[string]any, optional bool) (any, *nullWidening) {
	nw := &nullWidening{}
	_, hasProps := prop["properties"].(map[string]any)
	switch {
	case prop["type"] == "object" && hasProps:
		np, child := strictObject(prop, requiredOf(prop))
		if optional {
			np["type"], nw.widened = []any{"object", "null"}, true
		}
		nw.properties, nw.items = child.properties, child.items
		return np, nw
	case prop["type"] == "array" && prop["items"] != nil:
		np := copyMap(prop)
		items, im := strictItems(prop["items"])
		np["items"] = items
		if optional {
			np["type"], nw.widened = []any{"array", "null"}, true
		}
		if !im.empty() {
			nw.items = im
		}
		return np, nw
	case optional:
		np := copyMap(prop)
		if t, widened := withNull(prop["type"]); widened {
			np["type"], nw.widened = t, true
		}
		return np, nw
	}
	return prop, nw
}

// withNull adds "null" to a schema type, when it is a type and lacks it.
func withNull(t any) (any, bool) {
	switch t := t.(type) {
	case string:
		return []any{t, "null"}, true
	case []any:
		if !slices.Contains(t, any("null")) {
			return append(slices.Clone(t), "null"), true
		}
	}
	return t, false
}

func strictItems(items any) (any, *nullWidening) {
	m, ok := items.(map[string]any)
	if !ok {
		return items, nil
	}
	return strictObject(m, requiredOf(m))
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// undoWidening drops the nulls strictSchema synthesized; genuinely
// nullable fields keep theirs.
func undoWidening(v any, nw *nullWidening) (any, bool) {
	if v == nil {
		return nil, nw == nil || !nw.widened
	}
	if nw == nil {
		return v, true
	}
	switch x := v.(type) {
	case []any:
		if nw.items == nil {
			return x, true
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i], _ = undoWidening(e, nw.items)
		}
		return out, true
	case map[string]any:
		if nw.properties == nil {
			return x, true
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			if nv, keep := undoWidening(e, nw.properties[k]); keep {
				out[k] = nv
			}
		}
		return out, true
	}
	return v, true
}
