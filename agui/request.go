package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// RunInput is a chat request body: the AG-UI RunAgentInput plus the
// legacy `data` mirror of forwardedProps that @tanstack/ai-client sends.
type RunInput struct {
	ThreadID    string
	RunID       string
	ParentRunID string // "" when absent
	// Resume answers the interrupts of the parent run; nil when the body
	// has no resume key.
	Resume []ResumeEntry
	// State is the client's state, raw; nil when absent.
	State json.RawMessage
	// Messages are the validated rows, with any inbound "parts" removed.
	Messages []WireMessage
	// RawMessages is the messages array as received (parts included), for
	// ConvertMessages; nil when absent.
	RawMessages json.RawMessage
	// Tools are the client tools.
	Tools   []ClientTool
	Context []ContextItem
	// ForwardedProps is the forwarded props object, raw; "{}" when absent.
	ForwardedProps json.RawMessage
	// Data is the legacy mirror of ForwardedProps, raw; nil when absent.
	Data json.RawMessage
}

// InputMessages returns the rows as the elements of a mixed message list,
// ready for ToModelMessages.
func (in *RunInput) InputMessages() []InputMessage {
	out := make([]InputMessage, len(in.Messages))
	for i := range in.Messages {
		out[i] = InputMessage{Row: &in.Messages[i]}
	}
	return out
}

// ClientTool is a tool the client declares (and executes).
type ClientTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ContextItem is one entry of RunAgentInput.context.
type ContextItem struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// Resume statuses.
const (
	ResumeResolved  = "resolved"
	ResumeCancelled = "cancelled"
)

// ResumeEntry answers one interrupt.
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"` // "resolved" | "cancelled"
	Payload     json.RawMessage `json:"payload,omitempty"`
	Metadata    map[string]any  `json:"metadata,omitempty"`
}

// requestErrorPrefix is the reference's message, migration pointer included.
const requestErrorPrefix = "Request body is not a valid AG-UI RunAgentInput. If you're upgrading from a previous " +
	"@tanstack/ai-client release, see docs/migration/ag-ui-compliance.md. Validation errors: "

// InvalidBodyResponse is the text/plain body of the HTTP 400 that the
// reference's chatParamsFromRequest answers, for malformed JSON and for an
// invalid RunAgentInput alike (the details go to the server log).
const InvalidBodyResponse = "Invalid AG-UI request body. See docs/migration/ag-ui-compliance.md."

// RequestError reports a request body that is not a valid RunAgentInput.
// Servers answer it with HTTP 400.
type RequestError struct {
	// Problems lists every problem found, each starting with the JSON path
	// it concerns ("messages[2].role must be one of …"). The first is the
	// one the reference implementation reports.
	Problems []string
	// Offset is the byte offset of a JSON syntax error, or -1.
	Offset int64
	// Err is the underlying JSON error, if any.
	Err error
}

func (e *RequestError) Error() string { return requestErrorPrefix + strings.Join(e.Problems, "; ") }

// Unwrap returns the JSON error behind a malformed body.
func (e *RequestError) Unwrap() error { return e.Err }

// ParseRunInput parses and validates a request body the way
// chatParamsFromRequestBody does, but reports every problem instead of the
// first. It returns a *RequestError for malformed JSON or an invalid shape.
func ParseRunInput(body []byte) (*RunInput, error) {
	v := validator{}
	var top json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		re := &RequestError{Offset: -1, Err: err}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			re.Offset = se.Offset
			re.Problems = []string{fmt.Sprintf("body is not valid JSON: %v (at offset %d)", err, se.Offset)}
		} else {
			re.Problems = []string{"body is not valid JSON: " + err.Error()}
		}
		return nil, re
	}
	var b map[string]json.RawMessage
	if kind(top) != '{' || json.Unmarshal(top, &b) != nil {
		return nil, &RequestError{Problems: []string{"body must be a JSON object"}, Offset: -1}
	}
	in := &RunInput{Messages: []WireMessage{}, Tools: []ClientTool{}, Context: []ContextItem{}}
	in.ThreadID = v.str(b, "threadId", "threadId")
	in.RunID = v.str(b, "runId", "runId")
	if _, ok := b["parentRunId"]; ok {
		in.ParentRunID = v.str(b, "parentRunId", "parentRunId")
	}
	in.RawMessages = b["messages"]
	for i, raw := range v.array(b, "messages", "messages") {
		if m, ok := v.message(raw, "messages["+strconv.Itoa(i)+"]"); ok {
			in.Messages = append(in.Messages, m)
		}
	}
	for i, raw := range v.array(b, "tools", "tools") {
		at := "tools[" + strconv.Itoa(i) + "]"
		o, ok := v.object(raw, at)
		if !ok {
			continue
		}
		in.Tools = append(in.Tools, ClientTool{Name: v.str(o, "name", at+".name"),
			Description: v.str(o, "description", at+".description"), Parameters: o["parameters"]})
	}
	for i, raw := range v.array(b, "context", "context") {
		at := "context[" + strconv.Itoa(i) + "]"
		o, ok := v.object(raw, at)
		if !ok {
			continue
		}
		in.Context = append(in.Context, ContextItem{Description: v.str(o, "description", at+".description"),
			Value: v.str(o, "value", at+".value")})
	}
	if _, ok := b["resume"]; ok {
		in.Resume = []ResumeEntry{}
		for i, raw := range v.array(b, "resume", "resume") {
			if e, ok := v.resume(raw, "resume["+strconv.Itoa(i)+"]"); ok {
				in.Resume = append(in.Resume, e)
			}
		}
	}
	in.ForwardedProps = json.RawMessage(`{}`)
	if fp, ok := b["forwardedProps"]; ok {
		if kind(fp) != '{' {
			v.fail("forwardedProps must be an object")
		} else {
			in.ForwardedProps = fp
		}
	}
	in.State = b["state"]
	in.Data = b["data"]
	if len(v.problems) > 0 {
		return nil, &RequestError{Problems: v.problems, Offset: -1}
	}
	return in, nil
}

// kind is the first byte of a JSON value: '{', '[', '"', 'n', 't', 'f' or a
// number's first character; 0 when absent.
func kind(v json.RawMessage) byte {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

type validator struct{ problems []string }

func (v *validator) fail(p string) { v.problems = append(v.problems, p) }

func (v *validator) str(o map[string]json.RawMessage, key, at string) string {
	raw, ok := o[key]
	if !ok || kind(raw) != '"' {
		v.fail(at + " must be a string")
		return ""
	}
	return rawString(raw)
}

func (v *validator) array(o map[string]json.RawMessage, key, at string) []json.RawMessage {
	raw := o[key]
	var arr []json.RawMessage
	if kind(raw) != '[' || json.Unmarshal(raw, &arr) != nil {
		v.fail(at + " must be an array")
		return nil
	}
	return arr
}

func (v *validator) object(raw json.RawMessage, at string) (map[string]json.RawMessage, bool) {
	var o map[string]json.RawMessage
	if kind(raw) != '{' || json.Unmarshal(raw, &o) != nil {
		v.fail(at + " must be an object")
		return nil, false
	}
	return o, true
}

var aguiRoles = []string{RoleDeveloper, RoleSystem, RoleAssistant, RoleUser, RoleTool, RoleActivity, RoleReasoning}

func (v *validator) message(raw json.RawMessage, at string) (WireMessage, bool) {
	o, ok := v.object(raw, at)
	if !ok {
		return WireMessage{}, false
	}
	n := len(v.problems)
	v.str(o, "id", at+".id")
	role := rawString(o["role"])
	known := kind(o["role"]) == '"'
	if known {
		known = false
		for _, r := range aguiRoles {
			known = known || r == role
		}
	}
	if !known {
		v.fail(at + ".role must be one of " + strings.Join(aguiRoles, " | "))
	}
	has := func(k string) bool { _, ok := o[k]; return ok }
	switch role {
	case RoleAssistant:
		if has("content") {
			v.str(o, "content", at+".content")
		}
		if has("toolCalls") {
			v.array(o, "toolCalls", at+".toolCalls")
		}
	case RoleUser:
		if k := kind(o["content"]); k != '"' && k != '[' {
			v.fail(at + ".content must be a string or an array of content parts")
		}
	case RoleTool:
		v.str(o, "content", at+".content")
		v.str(o, "toolCallId", at+".toolCallId")
	case RoleActivity:
		v.str(o, "activityType", at+".activityType")
		if kind(o["content"]) != '{' {
			v.fail(at + ".content must be an object")
		}
	case RoleDeveloper, RoleSystem, RoleReasoning:
		v.str(o, "content", at+".content")
	}
	if has("metadata") && kind(o["metadata"]) != '{' {
		v.fail(at + ".metadata must be an object")
	}
	if len(v.problems) > n {
		return WireMessage{}, false
	}
	delete(o, "parts")
	w, err := decodeRow(o)
	if err != nil {
		v.fail(at + "." + err.Error())
		return WireMessage{}, false
	}
	return *w, true
}

func (v *validator) resume(raw json.RawMessage, at string) (ResumeEntry, bool) {
	o, ok := v.object(raw, at)
	if !ok {
		return ResumeEntry{}, false
	}
	n := len(v.problems)
	status := rawString(o["status"])
	if status != ResumeResolved && status != ResumeCancelled {
		v.fail(at + `.status must be "resolved" or "cancelled"`)
	}
	e := ResumeEntry{InterruptID: v.str(o, "interruptId", at+".interruptId"), Status: status}
	if p, ok := o["payload"]; ok {
		e.Payload = p
	}
	if md, ok := o["metadata"]; ok {
		if kind(md) != '{' {
			v.fail(at + ".metadata must be an object")
		} else {
			e.Metadata = rawObject(md)
		}
	}
	return e, len(v.problems) == n
}
