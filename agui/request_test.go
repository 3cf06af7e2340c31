package agui

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

type refRequestCase struct {
	Name  string          `json:"name"`
	Body  json.RawMessage `json:"body"`
	Error string          `json:"error"`
	// Model is convertMessagesToModelMessages(ok.messages): what the
	// reference engine makes of the body's messages.
	Model json.RawMessage `json:"model"`
	// random cases echo ill-typed optional fields the typed rows drop, so
	// only their conversion is compared.
	random bool
	OK     *struct {
		Messages       json.RawMessage `json:"messages"`
		ThreadID       string          `json:"threadId"`
		RunID          string          `json:"runId"`
		ParentRunID    string          `json:"parentRunId"`
		Tools          json.RawMessage `json:"tools"`
		Context        json.RawMessage `json:"context"`
		ForwardedProps json.RawMessage `json:"forwardedProps"`
		State          json.RawMessage `json:"state"`
		Resume         json.RawMessage `json:"resume"`
	} `json:"ok"`
}

func TestReferenceParseRunInput(t *testing.T) {
	var cases []refRequestCase
	loadJSON(t, "ref_request.json", &cases)
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	var random []refRequestCase
	if p := os.Getenv("AGUI_REF_RANDOM_REQUEST"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &random); err != nil {
			t.Fatal(err)
		}
	} else {
		loadJSON(t, "ref_random_request.json", &random)
	}
	for i := range random {
		random[i].random = true
	}
	cases = append(cases, random...)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			in, err := ParseRunInput(c.Body)
			if c.OK == nil {
				var re *RequestError
				if !errors.As(err, &re) {
					t.Fatalf("err = %v, want *RequestError", err)
				}
				want := c.Error[strings.Index(c.Error, "Validation errors: ")+len("Validation errors: "):]
				if re.Problems[0] != want {
					t.Errorf("first problem %q, want %q", re.Problems[0], want)
				}
				if len(re.Problems) == 1 && err.Error() != c.Error {
					t.Errorf("message\n got %s\nwant %s", err, c.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := c.OK
			if in.ThreadID != want.ThreadID || in.RunID != want.RunID || in.ParentRunID != want.ParentRunID {
				t.Errorf("ids %q %q %q, want %q %q %q", in.ThreadID, in.RunID, in.ParentRunID, want.ThreadID, want.RunID, want.ParentRunID)
			}
			check := func(what string, got any, want json.RawMessage) {
				t.Helper()
				gb, _ := json.Marshal(got)
				if want == nil {
					want = json.RawMessage("null")
				}
				if !jsonEqual(t, gb, want) {
					t.Errorf("%s\n got %s\nwant %s", what, gb, want)
				}
			}
			// An empty id is no id: the reference only ever tests ids for
			// truthiness.
			if !c.random {
				check("messages", MarshalWireMessages(in.Messages), dropEmptyIDs(t, want.Messages))
			}
			check("tools", in.Tools, want.Tools)
			check("context", in.Context, want.Context)
			check("forwardedProps", in.ForwardedProps, want.ForwardedProps)
			check("state", in.State, want.State)
			check("resume", in.Resume, want.Resume)
			gm, _ := json.Marshal(ToModelMessages(in.InputMessages()))
			if wm := modelView(t, dropEmptyIDs(t, c.Model)); !jsonEqual(t, gm, wm) {
				t.Errorf("model messages\n got %s\nwant %s", gm, wm)
			}
		})
	}
}

func TestParseRunInputListsEveryProblem(t *testing.T) {
	body := `{"threadId":1,"runId":null,"messages":[{"id":1,"role":"tool"},"x",{"id":"m","role":"user","content":"ok","metadata":[]}],
		"tools":{},"context":[{}],"resume":[{"status":"x"}],"forwardedProps":1}`
	_, err := ParseRunInput([]byte(body))
	var re *RequestError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v", err)
	}
	want := []string{
		"threadId must be a string",
		"runId must be a string",
		"messages[0].id must be a string",
		"messages[0].content must be a string",
		"messages[0].toolCallId must be a string",
		"messages[1] must be an object",
		"messages[2].metadata must be an object",
		"tools must be an array",
		"context[0].description must be a string",
		"context[0].value must be a string",
		`resume[0].status must be "resolved" or "cancelled"`,
		"resume[0].interruptId must be a string",
		"forwardedProps must be an object",
	}
	if !slices.Equal(re.Problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(re.Problems, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(err.Error(), "Request body is not a valid AG-UI RunAgentInput.") ||
		!strings.HasSuffix(err.Error(), "; forwardedProps must be an object") {
		t.Errorf("message: %s", err)
	}
}

func TestParseRunInputMalformedJSON(t *testing.T) {
	for _, tc := range []struct {
		body   string
		offset int64
	}{
		{`{"threadId":"t",}`, 17},
		{`{"threadId"`, 11},
		{``, 0},
		{`{"a":1} x`, 9},
	} {
		_, err := ParseRunInput([]byte(tc.body))
		var re *RequestError
		if !errors.As(err, &re) {
			t.Fatalf("%q: err = %v, want *RequestError", tc.body, err)
		}
		var se *json.SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: %v does not wrap a *json.SyntaxError", tc.body, err)
		}
		if re.Offset != tc.offset {
			t.Errorf("%q: offset %d, want %d (%v)", tc.body, re.Offset, tc.offset, err)
		}
		if !strings.Contains(err.Error(), "offset") {
			t.Errorf("%q: message lacks the offset: %v", tc.body, err)
		}
	}
}

func TestParseRunInputDefaults(t *testing.T) {
	in, err := ParseRunInput([]byte(`{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"hi","parts":[1]}],"tools":[],"context":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(in.ForwardedProps) != "{}" || in.Resume != nil || in.State != nil || in.Data != nil {
		t.Errorf("defaults: %+v", in)
	}
	if b := MarshalWireMessages(in.Messages); string(b) != `[{"id":"u","role":"user","content":"hi"}]` {
		t.Errorf("messages %s", b)
	}
}

func dropEmptyIDs(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	var msgs []map[string]any
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m["id"] == "" {
			delete(m, "id")
		}
	}
	b, _ := json.Marshal(msgs)
	return b
}

func TestCheck54RequestBodyNeedsRunIDAndLosesParts(t *testing.T) {
	_, err := ParseRunInput([]byte(`{"threadId":"t","messages":[],"tools":[],"context":[]}`))
	var re *RequestError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "runId") {
		t.Fatalf("a body without a string runId must be rejected naming it: %v", err)
	}
	in, err := ParseRunInput([]byte(`{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"hi","parts":[{"type":"text","content":"x"}]}],"tools":[],"context":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(in.Messages)
	if strings.Contains(string(raw), "parts") {
		t.Fatalf("inbound parts survived: %s", raw)
	}
}
