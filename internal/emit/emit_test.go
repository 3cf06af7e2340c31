package emit

import (
	"strconv"
	"strings"
	"testing"

	"github.com/goai-sdk/goai/agui"
)

// record returns a Lifecycle that records "TYPE id" lines and numbers ids.
func record(step StepPlacement, stepDeltas bool) (*Lifecycle, *[]string) {
	var got []string
	n := 0
	l := &Lifecycle{
		Emit: func(ev agui.Event) bool {
			id := ev.MessageID
			if ev.StepID != "" {
				id = ev.StepID
			}
			line := string(ev.Type) + " " + id
			if ev.Signature != "" || ev.Content != "" {
				line += " " + ev.Content + "/" + ev.Signature
			}
			got = append(got, line)
			return true
		},
		NewID: func(prefix string) string { n++; return prefix + strconv.Itoa(n) },
		Step:  step, StepDeltas: stepDeltas,
	}
	return l, &got
}

func TestLifecycleSequences(t *testing.T) {
	script := func(l *Lifecycle) {
		l.Reasoning("", "th")
		l.Reasoning("", "ink")
		l.Text("", "hi")
		l.Text("", "!")
		l.Text("m2", "x") // another id closes the open message
		l.Reasoning("r", "more")
		l.EndReasoning("sig")
		l.Close()
	}
	for _, tc := range []struct {
		name       string
		step       StepPlacement
		stepDeltas bool
		want       string
	}{
		{"after end", StepAfterEnd, false, `REASONING_START reasoning1|REASONING_MESSAGE_START reasoning1|STEP_STARTED step2|` +
			`REASONING_MESSAGE_CONTENT reasoning1|REASONING_MESSAGE_CONTENT reasoning1|` +
			`REASONING_MESSAGE_END reasoning1|REASONING_END reasoning1|STEP_FINISHED step2 think/|` +
			`TEXT_MESSAGE_START msg3|TEXT_MESSAGE_CONTENT msg3|TEXT_MESSAGE_CONTENT msg3|TEXT_MESSAGE_END msg3|` +
			`TEXT_MESSAGE_START m2|TEXT_MESSAGE_CONTENT m2|TEXT_MESSAGE_END m2|` +
			`REASONING_START r|REASONING_MESSAGE_START r|STEP_STARTED step4|REASONING_MESSAGE_CONTENT r|` +
			`REASONING_MESSAGE_END r|REASONING_END r|STEP_FINISHED step4 more/sig`},
		{"before end with deltas", StepBeforeEnd, true, `REASONING_START reasoning1|REASONING_MESSAGE_START reasoning1|STEP_STARTED step2|` +
			`REASONING_MESSAGE_CONTENT reasoning1|STEP_FINISHED step2 th/|REASONING_MESSAGE_CONTENT reasoning1|STEP_FINISHED step2 think/|` +
			`STEP_FINISHED step2 think/|REASONING_MESSAGE_END reasoning1|REASONING_END reasoning1|` +
			`TEXT_MESSAGE_START msg3|TEXT_MESSAGE_CONTENT msg3|TEXT_MESSAGE_CONTENT msg3|TEXT_MESSAGE_END msg3|` +
			`TEXT_MESSAGE_START m2|TEXT_MESSAGE_CONTENT m2|TEXT_MESSAGE_END m2|` +
			`REASONING_START r|REASONING_MESSAGE_START r|STEP_STARTED step4|REASONING_MESSAGE_CONTENT r|STEP_FINISHED step4 more/|` +
			`STEP_FINISHED step4 more/sig|REASONING_MESSAGE_END r|REASONING_END r`},
		{"if signed", StepIfSigned, false, `REASONING_START reasoning1|REASONING_MESSAGE_START reasoning1|STEP_STARTED step2|` +
			`REASONING_MESSAGE_CONTENT reasoning1|REASONING_MESSAGE_CONTENT reasoning1|` +
			`REASONING_MESSAGE_END reasoning1|REASONING_END reasoning1|` +
			`TEXT_MESSAGE_START msg3|TEXT_MESSAGE_CONTENT msg3|TEXT_MESSAGE_CONTENT msg3|TEXT_MESSAGE_END msg3|` +
			`TEXT_MESSAGE_START m2|TEXT_MESSAGE_CONTENT m2|TEXT_MESSAGE_END m2|` +
			`REASONING_START r|REASONING_MESSAGE_START r|STEP_STARTED step4|REASONING_MESSAGE_CONTENT r|` +
			`REASONING_MESSAGE_END r|REASONING_END r|STEP_FINISHED step4 more/sig`},
		{"around", StepAround, false, `STEP_STARTED reasoning1|REASONING_START reasoning1|REASONING_MESSAGE_START reasoning1|` +
			`REASONING_MESSAGE_CONTENT reasoning1|REASONING_MESSAGE_CONTENT reasoning1|` +
			`REASONING_MESSAGE_END reasoning1|REASONING_END reasoning1|STEP_FINISHED reasoning1 think/|` +
			`TEXT_MESSAGE_START msg2|TEXT_MESSAGE_CONTENT msg2|TEXT_MESSAGE_CONTENT msg2|TEXT_MESSAGE_END msg2|` +
			`TEXT_MESSAGE_START m2|TEXT_MESSAGE_CONTENT m2|TEXT_MESSAGE_END m2|` +
			`STEP_STARTED r|REASONING_START r|REASONING_MESSAGE_START r|REASONING_MESSAGE_CONTENT r|` +
			`REASONING_MESSAGE_END r|REASONING_END r|STEP_FINISHED r more/sig`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, got := record(tc.step, tc.stepDeltas)
			script(l)
			if g := strings.Join(*got, "|"); g != tc.want {
				t.Errorf("events:\n got %s\nwant %s", strings.ReplaceAll(g, "|", "\n     "), strings.ReplaceAll(tc.want, "|", "\n     "))
			}
			if l.TextOpen() || l.ReasoningOpen() || l.LastTextID() != "m2" {
				t.Errorf("after Close: text open %v, reasoning open %v, last text %q", l.TextOpen(), l.ReasoningOpen(), l.LastTextID())
			}
		})
	}
}

func TestLifecycleStopsWithTheConsumer(t *testing.T) {
	emitted := 0
	l := &Lifecycle{
		Emit:  func(agui.Event) bool { emitted++; return emitted < 2 },
		NewID: func(p string) string { return p },
	}
	if l.Text("", "a") {
		t.Fatal("Text reported success after Emit refused its second event")
	}
	if !l.Text("", "") || !l.EndReasoning("") {
		t.Fatal("a call with nothing to do must report true")
	}
	if emitted != 2 {
		t.Fatalf("emitted %d events, want 2 (start, refused content)", emitted)
	}
}
