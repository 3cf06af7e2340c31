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
