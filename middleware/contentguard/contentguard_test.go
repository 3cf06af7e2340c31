package contentguard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
	"github.com/goai-sdk/goai/middleware/contentguard"
	"github.com/goai-sdk/goai/middleware/internal/mwtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// refCase is one case of testdata/reference.json: the options, the text
// messages of one model turn, and what @tanstack/ai 0.58.0's
// contentGuardMiddleware emitted for them (its onChunk driven directly by a
// small node script over the same chunks), plus its onFiltered calls.
type refCase struct {
	Name string `json:"name"`
	Opts struct {
		Rules []struct {
			Pattern     string `json:"pattern"`
			Replacement string `json:"replacement"`
			Fn          string `json:"fn"`
		} `json:"rules"`
		Strategy     string `json:"strategy"`
		BufferSize   *int   `json:"bufferSize"`
		BlockOnMatch bool   `json:"blockOnMatch"`
	} `json:"opts"`
	Msgs []struct {
		ID      string   `json:"id"`
		Deltas  []string `json:"deltas"`
		End     *bool    `json:"end"`
		NoStart bool     `json:"noStart"`
	} `json:"msgs"`
	Outputs  []output                    `json:"outputs"`
	Filtered []contentguard.FilteredInfo `json:"filtered"`
}

type output struct {
	Type      string `json:"type"`
	MessageID string `json:"messageId,omitempty"`
	Delta     string `json:"delta,omitempty"`
}

var digit = regexp.MustCompile(`[0-9]`)

var fns = map[string]func(string) string{
	"upper":      strings.ToUpper,
	"maskDigits": func(s string) string { return digit.ReplaceAllString(s, "#") },
}

func (rc *refCase) options() contentguard.Options {
	var o contentguard.Options
	for _, r := range rc.Opts.Rules {
		if r.Fn != "" {
			o.Rules = append(o.Rules, contentguard.Rule{Func: fns[r.Fn]})
		} else {
			o.Rules = append(o.Rules, contentguard.Rule{Pattern: regexp.MustCompile(r.Pattern), Replacement: r.Replacement})
		}
	}
	o.Strategy = contentguard.Strategy(rc.Opts.Strategy)
	if rc.Opts.BufferSize != nil {
		o.BufferSize = *rc.Opts.BufferSize
		if o.BufferSize == 0 {
			o.BufferSize = -1
		}
	}
	o.BlockOnMatch = rc.Opts.BlockOnMatch
	return o
}

func (rc *refCase) turn() []agui.Event {
	evs := []agui.Event{{Type: agui.RunStarted, ThreadID: "t", RunID: "r"}}
	for _, m := range rc.Msgs {
		if !m.NoStart {
			evs = append(evs, agui.Event{Type: agui.TextMessageStart, MessageID: m.ID, Role: "assistant"})
		}
		for _, d := range m.Deltas {
			evs = append(evs, agui.Event{Type: agui.TextMessageContent, MessageID: m.ID, Delta: d})
		}
		if m.End == nil || *m.End {
			evs = append(evs, agui.Event{Type: agui.TextMessageEnd, MessageID: m.ID})
		}
	}
	return append(evs, agui.Event{Type: agui.RunFinished, ThreadID: "t", RunID: "r", FinishReason: agui.FinishStop})
}

func outputs(evs []agui.Event) []output {
	var out []output
	for _, e := range evs {
		o := output{Type: string(e.Type)}
		if e.Type == agui.TextMessageContent {
			o.MessageID, o.Delta = e.MessageID, e.Delta
		}
		out = append(out, o)
	}
	return out
}

func js(v any) string {
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

// TestMatchesReference runs every reference case through the real engine
// and compares the emitted events and onFiltered calls with 0.58.0's.
func TestMatchesReference(t *testing.T) {
	b, err := os.ReadFile("testdata/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []refCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 15 {
		t.Fatalf("only %d reference cases", len(cases))
	}
	for _, rc := range cases {
		t.Run(rc.Name, func(t *testing.T) {
			opts := rc.options()
			var got []contentguard.FilteredInfo
			opts.OnFiltered = func(_ *chat.Context, fi contentguard.FilteredInfo) { got = append(got, fi) }
			var text strings.Builder
			history := &chat.Middleware{Name: "spy", OnFinish: func(c *chat.Context, info chat.FinishInfo) error {
				text.WriteString(info.Content)
				return nil
			}}
			a := &mwtest.Turns{Turns: [][]agui.Event{rc.turn()}}
			evs := mwtest.Collect(t, chat.Options{Adapter: a, Messages: mwtest.User("hi"),
				Middleware: []*chat.Middleware{contentguard.New(opts), history}})
			if g, w := js(outputs(evs)), js(rc.Outputs); g != w {
				t.Errorf("events differ from 0.58.0:\n got %s\nwant %s", g, w)
			}
			if g, w := js(got), js(rc.Filtered); g != w && len(got)+len(rc.Filtered) > 0 {
				t.Errorf("onFiltered calls differ from 0.58.0:\n got %s\nwant %s", g, w)
			}
			// The engine's own record of the turn is the unfiltered text.
			var raw strings.Builder
			for _, m := range rc.Msgs {
				raw.WriteString(strings.Join(m.Deltas, ""))
			}
			if text.String() != raw.String() {
				t.Errorf("onFinish content %q, want the unfiltered %q", text.String(), raw.String())
			}
		})
	}
}

// The concatenated output of the buffered guard is the filtered text,
// whatever the chunking, when the buffer is at least the longest match (a
// smaller buffer can emit the start of a match before it completes, as in
// 0.58.0: see the buffered-size0 reference case).
func TestBufferedOutputIsFilteredText(t *testing.T) {
	ssn := regexp.MustCompile(`\b\d{3}-\d{2}-\d{4}\b`)
	text := "Call 123-45-6789 or 987-65-4321; café ☕ and 😀 emoji 111-22-3333 end"
	want := ssn.ReplaceAllString(text, "[SSN]")
	for _, size := range []int{11, 12, 20, 50} {
		for _, step := range []int{1, 2, 3, 7, 100} {
			deltas := validUTF8Chunks(text, step)
			a := &mwtest.Turns{Turns: [][]agui.Event{mwtest.TextTurn("m", deltas...)}}
			evs := mwtest.Collect(t, chat.Options{Adapter: a, Messages: mwtest.User("hi"),
				Middleware: []*chat.Middleware{contentguard.New(contentguard.Options{BufferSize: size,
					Rules: []contentguard.Rule{{Pattern: ssn, Replacement: "[SSN]"}}})}})
			var got strings.Builder
			for _, e := range mwtest.Of(evs, agui.TextMessageContent) {
				if e.Delta == "" {
					t.Errorf("size %d step %d: empty delta emitted", size, step)
				}
				got.WriteString(e.Delta)
			}
			if got.String() != want {
				t.Errorf("size %d step %d: got %q, want %q", size, step, got.String(), want)
			}
		}
	}
}

// validUTF8Chunks splits s into chunks of about step bytes on rune
// boundaries.
func validUTF8Chunks(s string, step int) []string {
	var out []string
	start := 0
	n := 0
	for i := range s {
		if n == step {
			out = append(out, s[start:i])
			start, n = i, 0
		}
		n++
	}
	return append(out, s[start:])
}

// An astral character straddling the cut is held back whole, never split.
func TestNoSurrogateSplit(t *testing.T) {
	// "ab😀" is 4 UTF-16 units; with BufferSize 1 the safe end (3) falls
	// inside the emoji, which 0.58.0 would split.
	a := &mwtest.Turns{Turns: [][]agui.Event{mwtest.TextTurn("m", "ab😀", "c")}}
	evs := mwtest.Collect(t, chat.Options{Adapter: a, Messages: mwtest.User("hi"),
		Middleware: []*chat.Middleware{contentguard.New(contentguard.Options{BufferSize: 1, Rules: []contentguard.Rule{{Func: strings.ToUpper}}})}})
	var deltas []string
	for _, e := range mwtest.Of(evs, agui.TextMessageContent) {
		deltas = append(deltas, e.Delta)
	}
	if fmt.Sprint(deltas) != fmt.Sprint([]string{"AB", "😀", "C"}) {
		t.Fatalf("deltas %q", deltas)
	}
}

// Buffered state is per run: concurrent runs through one middleware value
// do not mix their text (run with -race).
func TestConcurrentRunsDoNotShareBuffers(t *testing.T) {
	mw := contentguard.New(contentguard.Options{BufferSize: 4, Rules: []contentguard.Rule{{Pattern: regexp.MustCompile(`secret`), Replacement: "***"}}})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			word := fmt.Sprintf("run%d", i)
			a := &mwtest.Turns{Turns: [][]agui.Event{mwtest.TextTurn("m", word, " has a sec", "ret ", word)}}
			evs := mwtest.Collect(t, chat.Options{Adapter: a, Messages: mwtest.User("hi"), Middleware: []*chat.Middleware{mw}})
			var got strings.Builder
			for _, e := range mwtest.Of(evs, agui.TextMessageContent) {
				got.WriteString(e.Delta)
			}
			if want := word + " has a *** " + word; got.String() != want {
				t.Errorf("got %q, want %q", got.String(), want)
			}
		}()
	}
	wg.Wait()
}

// Tool events and results pass untouched; only assistant text is guarded.
func TestOtherEventsPass(t *testing.T) {
	a := &mwtest.Turns{Turns: [][]agui.Event{
		mwtest.ToolTurn(mwtest.Call{ID: "c1", Name: "echo", Args: `{"t":"secret"}`}),
		mwtest.TextTurn("m", "no secret here"),
	}}
	echo := &chat.Tool{Name: "echo", Execute: func(_ context.Context, args json.RawMessage) (any, error) { return string(args), nil }}
	evs := mwtest.Collect(t, chat.Options{Adapter: a, Messages: mwtest.User("hi"), Tools: []*chat.Tool{echo},
		Middleware: []*chat.Middleware{contentguard.New(contentguard.Options{Rules: []contentguard.Rule{{Pattern: regexp.MustCompile(`secret`), Replacement: "***"}}})}})
	var args, result, text string
	for _, e := range evs {
		switch e.Type {
		case agui.ToolCallArgs:
			args += e.Delta
		case agui.ToolCallResult:
			result += e.Content
		case agui.TextMessageContent:
			text += e.Delta
		}
	}
	if args != `{"t":"secret"}` || result != `{"t":"secret"}` || text != "no *** here" {
		t.Fatalf("args %q result %q text %q", args, result, text)
	}
}
