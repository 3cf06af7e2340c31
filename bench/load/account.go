package main

import (
	"fmt"
	"strconv"
	"strings"
)

// event is what the accounting needs of one wire event.
type event struct {
	ID         string // SSE id: line, "" when absent
	Type       string
	MessageID  string
	Delta      string
	ToolCallID string
	Timestamp  int64 // ms; the model's yield time when the scenario stamps it
}

// tally counts what one or more streams delivered and what went wrong.
type tally struct {
	Streams    int // streams checked
	Failed     int // streams with any error (HTTP, transport, protocol, RUN_ERROR, or any loss)
	Events     int // events read
	Tokens     int // distinct text tokens delivered
	Lost       int // tokens or events that never arrived
	Duplicated int // events that arrived twice
	Reordered  int // events that arrived after a later one of the same sequence
	Protocol   int // events out of place (content before start, anything after the end, ...)
	RunErrors  int // RUN_ERROR events
}

func (t *tally) add(o tally) {
	t.Streams += o.Streams
	t.Failed += o.Failed
	t.Events += o.Events
	t.Tokens += o.Tokens
	t.Lost += o.Lost
	t.Duplicated += o.Duplicated
	t.Reordered += o.Reordered
	t.Protocol += o.Protocol
	t.RunErrors += o.RunErrors
}

// message tracks the numbered deltas "w<j> " of one text message.
type message struct {
	seen  []bool
	high  int // one past the highest index seen
	count int
	ended bool
}

// checker verifies one stream: a run that starts with RUN_STARTED, holds one
// or more text messages of exactly tokens numbered deltas each ("w0 " ..
// "w<tokens-1> ", in order), tool calls whose START, ARGS and END agree, and
// ends with RUN_FINISHED. SSE ids, when the server sends them, must count
// up by one. Everything that departs from that is counted in the tally, not
// returned as an error, so one bad stream does not hide the others.
type checker struct {
	tokens int
	// oneTerminal: the agui wire, where RUN_FINISHED ends the run. The
	// tanstack wire ends every model turn with one, and the run goes on
	// with tool results and the next turn.
	oneTerminal bool
	t           tally
	msgs        map[string]*message
	order       []string
	last        *message // the message of the last content, if any
	lastID      string
	calls       map[string]int // toolCallId -> 1 started, 2 ended
	started     bool
	finished    bool // the last event so far is RUN_FINISHED
	lastSeq     int64
	haveSeq     bool
	problems    []string
}

func newChecker(tokens int, oneTerminal bool) *checker {
	return &checker{tokens: tokens, oneTerminal: oneTerminal, msgs: map[string]*message{}, calls: map[string]int{}}
}

func (c *checker) problem(format string, args ...any) {
	if len(c.problems) < 5 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

// tokenIndex parses the j of a "w<j> " delta.
func tokenIndex(delta string) (int, bool) {
	s, ok := strings.CutPrefix(delta, "w")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, " ")
	if !ok {
		return 0, false
	}
	j, err := strconv.Atoi(s)
	return j, err == nil && j >= 0
}

// idSeq is the number at the end of an offset ("...:42" -> 42).
func idSeq(id string) (int64, bool) {
	if i := strings.LastIndexByte(id, ':'); i >= 0 {
		id = id[i+1:]
	}
	n, err := strconv.ParseInt(id, 10, 64)
	return n, err == nil
}

// add accounts for the next event of the stream.
func (c *checker) add(e *event) {
	c.t.Events++
	if e.ID != "" {
		if seq, ok := idSeq(e.ID); ok {
			switch {
			case !c.haveSeq:
			case seq == c.lastSeq:
				c.t.Duplicated++
				c.problem("id %s repeated", e.ID)
			case seq < c.lastSeq:
				c.t.Reordered++
				c.problem("id %s after %d", e.ID, c.lastSeq)
			case seq > c.lastSeq+1:
				c.t.Lost += int(seq - c.lastSeq - 1)
				c.problem("ids %d..%d missing", c.lastSeq+1, seq-1)
			}
			if !c.haveSeq || seq > c.lastSeq {
				c.lastSeq, c.haveSeq = seq, true
			}
		}
	}
	if c.finished && c.oneTerminal {
		c.t.Protocol++
		c.problem("%s after RUN_FINISHED", e.Type)
	}
	c.finished = false
	if !c.started && e.Type != "RUN_STARTED" {
		c.t.Protocol++
		c.problem("first event %s, want RUN_STARTED", e.Type)
		c.started = true
	}
	switch e.Type {
	case "RUN_STARTED":
		c.started = true
	case "RUN_FINISHED":
		c.finished = true
	case "RUN_ERROR":
		c.t.RunErrors++
		c.problem("RUN_ERROR")
	case "TEXT_MESSAGE_START":
		if _, ok := c.msgs[e.MessageID]; ok {
			c.t.Duplicated++
			c.problem("TEXT_MESSAGE_START %s twice", e.MessageID)
			return
		}
		c.msgs[e.MessageID] = &message{seen: make([]bool, c.tokens)}
		c.order = append(c.order, e.MessageID)
	case "TEXT_MESSAGE_CONTENT":
		m := c.last
		if m == nil || e.MessageID != c.lastID {
			m = c.msgs[e.MessageID]
			c.last, c.lastID = m, e.MessageID
		}
		if m == nil || m.ended {
			c.t.Protocol++
			c.problem("content of %s outside its start and end", e.MessageID)
			return
		}
		j, ok := tokenIndex(e.Delta)
		if !ok || j >= c.tokens {
			c.t.Protocol++
			c.problem("delta %q is not a token of this benchmark", e.Delta)
			return
		}
		switch {
		case m.seen[j]:
			c.t.Duplicated++
			c.problem("token %d of %s twice", j, e.MessageID)
			return
		case j < m.high:
			c.t.Reordered++
			c.problem("token %d of %s after %d", j, e.MessageID, m.high-1)
		}
		m.seen[j] = true
		m.count++
		if j+1 > m.high {
			m.high = j + 1
		}
	case "TEXT_MESSAGE_END":
		m := c.msgs[e.MessageID]
		if m == nil || m.ended {
			c.t.Protocol++
			c.problem("TEXT_MESSAGE_END of %s without its start", e.MessageID)
			return
		}
		m.ended = true
	case "TOOL_CALL_START":
		// The same id may start again after its end: a scripted model's
		// tool turns can follow each other within one run.
		if c.calls[e.ToolCallID] == 1 {
			c.t.Duplicated++
			c.problem("TOOL_CALL_START %s twice", e.ToolCallID)
			return
		}
		c.calls[e.ToolCallID] = 1
	case "TOOL_CALL_ARGS":
		if c.calls[e.ToolCallID] != 1 {
			c.t.Protocol++
			c.problem("TOOL_CALL_ARGS of %s outside its start and end", e.ToolCallID)
		}
	case "TOOL_CALL_END":
		if c.calls[e.ToolCallID] != 1 {
			c.t.Protocol++
			c.problem("TOOL_CALL_END of %s without its start", e.ToolCallID)
			return
		}
		c.calls[e.ToolCallID] = 2
	}
}

// end closes the stream's accounting and returns its tally. transportErr is
// the error that cut the stream short, if any.
func (c *checker) end(transportErr error) tally {
	t := c.t
	t.Streams = 1
	if transportErr != nil {
		c.problem("%v", transportErr)
	}
	if !c.started {
		t.Protocol++
		c.problem("no RUN_STARTED")
	}
	if !c.finished {
		t.Lost++ // the terminal RUN_FINISHED
		c.problem("stream does not end with RUN_FINISHED")
	}
	text := 0
	for _, id := range c.order {
		m := c.msgs[id]
		text++
		t.Tokens += m.count
		if miss := c.tokens - m.count; miss > 0 {
			t.Lost += miss
			c.problem("%s lost %d of %d tokens", id, miss, c.tokens)
		}
		if !m.ended {
			t.Lost++ // its TEXT_MESSAGE_END
			c.problem("%s has no TEXT_MESSAGE_END", id)
		}
	}
	if text == 0 {
		t.Lost += c.tokens
		c.problem("no text message")
	}
	for id, st := range c.calls {
		if st != 2 {
			t.Lost++
			c.problem("tool call %s has no TOOL_CALL_END", id)
		}
	}
	if transportErr != nil || t.Lost+t.Duplicated+t.Reordered+t.Protocol+t.RunErrors > 0 {
		t.Failed = 1
	}
	return t
}
