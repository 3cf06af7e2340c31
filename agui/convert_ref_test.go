package agui

import (
	"encoding/json"
	"os"
	"testing"
)

type refMsgCase struct {
	Name   string          `json:"name"`
	RunID  string          `json:"runId"`
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output"`
}

type refMessages struct {
	Convert  []refMsgCase `json:"convert"`
	Snapshot []refMsgCase `json:"snapshot"`
	UIToWire []refMsgCase `json:"uiToWire"`
}

// modelMessageKeys are the keys a Go ModelMessage can hold. The reference
// passes rows through "as is", so its output may carry wire-only keys
// (a tool call's encryptedValue, ...) that adapters never read.
var modelMessageKeys = map[string]bool{"role": true, "content": true, "name": true, "toolCalls": true,
	"toolCallId": true, "thinking": true, "structuredOutput": true, "id": true, "createdAt": true,
	"error": true, "metadata": true}

func modelView(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	var msgs []map[string]any
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		for k := range m {
			if !modelMessageKeys[k] {
				delete(m, k)
			}
		}
		if _, ok := m["content"]; !ok {
			m["content"] = nil
		}
		if calls, ok := m["toolCalls"].([]any); ok {
			for _, c := range calls {
				delete(c.(map[string]any), "encryptedValue")
			}
		}
	}
	b, _ := json.Marshal(msgs)
	return b
}

func TestReferenceConvertMessages(t *testing.T) {
	var ref refMessages
	loadJSON(t, "ref_messages.json", &ref)
	if len(ref.Convert) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range ref.Convert {
		t.Run(c.Name, func(t *testing.T) {
			got, _, err := ConvertMessages(c.Input)
			if err != nil {
				t.Fatal(err)
			}
			gb, _ := json.Marshal(got)
			if want := modelView(t, c.Output); !jsonEqual(t, gb, want) {
				t.Errorf("ConvertMessages\n got %s\nwant %s", gb, want)
			}
		})
	}
}

func TestReferenceSnapshotMessages(t *testing.T) {
	var ref refMessages
	loadJSON(t, "ref_messages.json", &ref)
	for _, c := range ref.Snapshot {
		t.Run(c.Name, func(t *testing.T) {
			var msgs []ModelMessage
			if err := json.Unmarshal(c.Input, &msgs); err != nil {
				t.Fatal(err)
			}
			got := MarshalWireMessages(SnapshotMessages(msgs, c.RunID))
			if !jsonEqual(t, got, c.Output) {
				t.Errorf("SnapshotMessages\n got %s\nwant %s", got, c.Output)
			}
		})
	}
	for _, c := range ref.UIToWire {
		t.Run("ui/"+c.Name, func(t *testing.T) {
			var msgs []UIMessage
			if err := json.Unmarshal(c.Input, &msgs); err != nil {
				t.Fatal(err)
			}
			got := MarshalWireMessages(UIToWire(msgs, false))
			if !jsonEqual(t, got, c.Output) {
				t.Errorf("UIToWire\n got %s\nwant %s", got, c.Output)
			}
		})
	}
}

// TestReferenceRandomMessages replays randomly generated message lists
// (testdata/ref_random.json, or the file named by $AGUI_REF_RANDOM) through
// the conversions, against the reference's outputs for them.
func TestReferenceRandomMessages(t *testing.T) {
	name := "ref_random.json"
	var ref refMessages
	if p := os.Getenv("AGUI_REF_RANDOM"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatal(err)
		}
	} else {
		loadJSON(t, name, &ref)
	}
	for _, c := range ref.Convert {
		got, _, err := ConvertMessages(c.Input)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		gb, _ := json.Marshal(got)
		if want := modelView(t, c.Output); !jsonEqual(t, gb, want) {
			t.Errorf("convert %s\ninput %s\n  got %s\n want %s", c.Name, c.Input, gb, want)
		}
	}
	for _, c := range ref.Snapshot {
		var msgs []ModelMessage
		if err := json.Unmarshal(c.Input, &msgs); err != nil {
			t.Fatal(err)
		}
		if got := MarshalWireMessages(SnapshotMessages(msgs, c.RunID)); !jsonEqual(t, got, c.Output) {
			t.Errorf("snapshot %s\ninput %s\n  got %s\n want %s", c.Name, c.Input, got, c.Output)
		}
	}
	for _, c := range ref.UIToWire {
		var msgs []UIMessage
		if err := json.Unmarshal(c.Input, &msgs); err != nil {
			t.Fatal(err)
		}
		if got := MarshalWireMessages(UIToWire(msgs, false)); !jsonEqual(t, got, c.Output) {
			t.Errorf("uiToWire %s\ninput %s\n  got %s\n want %s", c.Name, c.Input, got, c.Output)
		}
	}
}
