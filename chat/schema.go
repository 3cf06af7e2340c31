package chat

import (
	"encoding/json"
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
	props, isObj := s["properties"].(map[string]any)
	if s["type"] == "object" && isObj {
		newProps := make(map[string]any, len(props))
		names := make([]any, 0, len(props))
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, name := range keys {
			names = append(names, name)
			prop, ok := props[name].(map[string]any)
			if !ok {
				newProps[name] = props[name]
				continue
			}
			optional := !slices.Contains(required, name)
			var child *nullWidening
			widened := false
			_, hasProps := prop["properties"].(map[string]any)
			switch {
			case prop["type"] == "object" && hasProps:
				ns, cm := strictObject(prop, requiredOf(prop))
				if optional {
					ns["type"] = []any{"object", "null"}
					widened = true
				}
				newProps[name], child = ns, cm
			case prop["type"] == "array" && prop["items"] != nil:
				np := copyMap(prop)
				items, im := strictItems(prop["items"])
				np["items"] = items
				if optional {
					np["type"] = []any{"array", "null"}
					widened = true
				}
				newProps[name] = np
				if !im.empty() {
					child = &nullWidening{items: im}
				}
			case optional:
				np := copyMap(prop)
				switch t := prop["type"].(type) {
				case string:
					np["type"] = []any{t, "null"}
					widened = true
				case []any:
					if !slices.Contains(t, any("null")) {
						np["type"] = append(slices.Clone(t), "null")
						widened = true
					}
				}
				newProps[name] = np
			default:
				newProps[name] = prop
			}
			if widened || !child.empty() {
				m := &nullWidening{widened: widened}
				if child != nil {
					m.properties, m.items = child.properties, child.items
				}
				if nw.properties == nil {
					nw.properties = map[string]*nullWidening{}
				}
				nw.properties[name] = m
			}
		}
		out["properties"] = newProps
		out["required"] = names
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
