package chat

import "encoding/json"

// StrictSchema returns schema as OpenAI's strict mode accepts it: every
// object property required, "additionalProperties": false, and originally
// optional properties widened with "null". Adapters use it for strict
// tools; a schema that is not a JSON object is returned unchanged.
func StrictSchema(schema json.RawMessage) json.RawMessage {
	s, _ := strictSchema(schema)
	return s
}

// StrictArguments undoes, in a tool call's arguments, what strict mode
// makes a model do: an optional property it would have omitted arrives as
// null, because StrictSchema(schema) required it and allowed null. Those
// nulls are removed, and only those: a property schema itself allows to be
// null keeps its null. An adapter that sent a tool's parameters through
// StrictSchema calls this on the completed arguments, so the tool (and its
// input validation) sees what its own schema describes. args that are not
// JSON are returned unchanged.
func StrictArguments(schema, args json.RawMessage) json.RawMessage {
	_, nw := strictSchema(schema)
	if nw == nil {
		return args
	}
	var v any
	if json.Unmarshal(args, &v) != nil {
		return args
	}
	stripped, _ := undoWidening(v, nw)
	b, err := marshalCompact(stripped)
	if err != nil {
		return args
	}
	return b
}
