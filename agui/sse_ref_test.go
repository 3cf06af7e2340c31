package agui

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestReferenceReadSSE feeds streams to ReadSSE and to the reference
// client's fetchServerSentEvents adapter (testdata/ref_sse.json) and
// compares the restored events and where the stream fails.
func TestReferenceReadSSE(t *testing.T) {
	var cases map[string]struct {
		Input  string            `json:"input"`
		Events []json.RawMessage `json:"events"`
	}
	loadJSON(t, "ref_sse.json", &cases)
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var got []json.RawMessage
			var gotErr error
			for fr, err := range ReadSSE(strings.NewReader(c.Input)) {
				if err != nil {
					gotErr = err
					break
				}
				if fr.Data != nil { // the synthesized [DONE] terminal is not restored
					Restore(&fr.Event)
				}
				got = append(got, AppendJSON(nil, &fr.Event))
			}
			want := c.Events
			var wantErr string
			if n := len(want); n > 0 {
				var e struct{ Error string }
				if json.Unmarshal(want[n-1], &e) == nil && e.Error != "" {
					wantErr, want = e.Error, want[:n-1]
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d events, want %d:\n got %s\nwant %s", len(got), len(want), got, want)
			}
			for i := range got {
				g, w := dropTimestampOfDone(t, got[i]), dropTimestampOfDone(t, want[i])
				if !jsonEqual(t, g, w) {
					t.Errorf("event %d\n got %s\nwant %s", i, got[i], want[i])
				}
			}
			switch {
			case wantErr == "" && gotErr != nil:
				t.Errorf("unexpected error %v", gotErr)
			case wantErr != "" && gotErr == nil:
				t.Errorf("no error, want %s", wantErr)
			case strings.HasPrefix(wantErr, "StreamTruncatedError") != errors.Is(gotErr, ErrTruncated):
				t.Errorf("error %v, want %s", gotErr, wantErr)
			}
		})
	}
}

// dropTimestampOfDone removes the clock-dependent timestamp of a
// synthesized [DONE] terminal.
func dropTimestampOfDone(t *testing.T, b []byte) []byte {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["type"] == "RUN_FINISHED" {
		if md, ok := m["metadata"].(map[string]any); ok && md["tanstack"] != nil {
			delete(m, "timestamp")
		}
	}
	out, _ := json.Marshal(m)
	return out
}
