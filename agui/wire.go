package agui

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"
)

// Format is a wire encoding.
type Format string

const (
	SSE    Format = "sse"
	NDJSON Format = "ndjson"
)

// ContentType returns the HTTP Content-Type of the format.
func (f Format) ContentType() string {
	if f == NDJSON {
		return "application/x-ndjson"
	}
	return "text/event-stream"
}

// Profile selects the event sequence the encoder writes.
type Profile string

const (
	// ProfileAGUI (the default) is strictly AG-UI compliant: one RUN_STARTED
	// first and exactly one terminal event per run. The RUN_FINISHED that
	// closes an intermediate model turn travels as a CUSTOM "turn.finished"
	// event carrying the same finish reason, usage and model, and a stream
	// that ends without a terminal event gets a RUN_ERROR "aborted".
	ProfileAGUI Profile = "agui"
	// ProfileTanStack writes the event sequence exactly as the reference
	// engine 0.58.0 does: one RUN_FINISHED per model turn, tool results between
	// turns, and nothing at all after an abort.
	ProfileTanStack Profile = "tanstack"
)

// TurnFinishedEvent is the CUSTOM name under which the agui profile carries
// an intermediate turn's RUN_FINISHED.
const TurnFinishedEvent = "turn.finished"

// WriterOptions configures a Writer.
type WriterOptions struct {
	Format  Format  // default SSE
	Profile Profile // default ProfileAGUI
	// ThreadID and RunID name the run for events the agui profile has to
	// synthesize (a RUN_STARTED when the stream starts with tool results,
	// the RUN_ERROR of an aborted run).
	ThreadID, RunID string
	// Now stamps synthesized events; default time.Now.
	Now func() time.Time
	// Emit, when set, receives each event the profile produces, and its
	// wire encoding, instead of the encoder writing bytes (a durable
	// producer appends them to its log). Both are the writer's and valid
	// only during the call: copy what is kept.
	Emit func(e *Event, wire []byte) error
}

// Writer encodes events to SSE or NDJSON frames, one Write call on the
// underlying writer per frame. It is not safe for concurrent use.
type Writer struct {
	w        io.Writer
	opt      WriterOptions
	buf      []byte
	emitted  *Event // Emit's event, the writer's copy
	held     *Event // agui profile: the last RUN_FINISHED, not yet known to be final
	heldID   string
	lastTurn *Event // agui profile: the last RUN_FINISHED passed on as turn.finished
	started  bool
	terminal bool
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer, opt WriterOptions) *Writer {
	if opt.Format == "" {
		opt.Format = SSE
	}
	if opt.Profile == "" {
		opt.Profile = ProfileAGUI
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Writer{w: w, opt: opt, buf: make([]byte, 0, 512)}
}

// Write encodes one event.
func (w *Writer) Write(e *Event) error { return w.WriteID("", e) }

// WriteID encodes one event with a durable offset: an SSE `id:` line or the
// NDJSON {"id","chunk"} envelope. An empty id writes a plain frame.
func (w *Writer) WriteID(id string, e *Event) error {
	if w.opt.Profile != ProfileAGUI {
		return w.frame(id, e)
	}
	if w.terminal {
		return nil // nothing may follow a run's terminal event
	}
	if w.held != nil && e.Type == Custom {
		// Side-channel events (file events, progress) that arrive after a
		// turn's RUN_FINISHED still belong to the run: send them and keep
		// holding, so the run's terminal event stays last.
		return w.frame(id, e)
	}
	if w.held != nil {
		if err := w.sendHeld(); err != nil {
			return err
		}
	}
	switch e.Type {
	case RunStarted:
		if w.started {
			return nil
		}
		w.started = true
		if w.opt.RunID == "" {
			w.opt.RunID = e.RunID
		}
		if w.opt.ThreadID == "" {
			w.opt.ThreadID = e.ThreadID
		}
		return w.frame(id, e)
	case RunFinished:
		if err := w.ensureStarted(); err != nil {
			return err
		}
		c := *e
		w.held, w.heldID = &c, id
		return nil
	case RunError:
		if err := w.ensureStarted(); err != nil {
			return err
		}
		w.terminal = true
		return w.frame(id, e)
	}
	if err := w.ensureStarted(); err != nil {
		return err
	}
	return w.frame(id, e)
}

// sendHeld sends the held RUN_FINISHED of a turn that another followed.
// Not inlined: the event it builds would otherwise be in WriteID's frame,
// on the stack of every event written.
//
//go:noinline
func (w *Writer) sendHeld() error {
	turn := turnFinished(w.held)
	w.lastTurn = w.held
	heldID := w.heldID
	w.held, w.heldID = nil, ""
	return w.frame(heldID, &turn)
}

func (w *Writer) ensureStarted() error {
	if w.started {
		return nil
	}
	w.started = true
	rs := Event{Type: RunStarted, ThreadID: w.opt.ThreadID, RunID: w.opt.RunID, Timestamp: w.opt.Now().UnixMilli()}
	return w.frame("", &rs)
}

// turnFinished re-expresses an intermediate RUN_FINISHED as a CUSTOM event.
func turnFinished(rf *Event) Event {
	n := normalizeSpec(rf)
	val := map[string]any{}
	if n.RunID != "" {
		val["runId"] = n.RunID
	}
	if ts := n.TanstackMeta(); ts != nil {
		for k, v := range ts {
			val[k] = v
		}
	}
	if n.Usage != nil {
		val["usage"] = n.Usage
	}
	raw, _ := marshalNoEscape(val)
	return Event{Type: Custom, Name: TurnFinishedEvent, Value: raw, Timestamp: rf.Timestamp}
}

// Close ends a run that completed. In the agui profile it writes the held
// final RUN_FINISHED; a run whose last turn's RUN_FINISHED was already
// passed on as turn.finished (an iteration limit stopped it after its tool
// results) gets a final RUN_FINISHED with that turn's finish reason, and a
// run that produced no event at all (a model that said nothing) gets
// RUN_STARTED and RUN_FINISHED. It does not close the underlying writer. Use Abort for a run that stopped
// without finishing.
func (w *Writer) Close() error {
	if w.opt.Profile != ProfileAGUI || w.terminal {
		return nil
	}
	w.terminal = true
	if w.held != nil {
		h, id := w.held, w.heldID
		w.held = nil
		return w.frame(id, h)
	}
	if err := w.ensureStarted(); err != nil {
		return err
	}
	fin := Event{Type: RunFinished, ThreadID: w.opt.ThreadID, RunID: w.opt.RunID, Timestamp: w.opt.Now().UnixMilli()}
	if w.lastTurn != nil {
		fin = *w.lastTurn
		fin.Timestamp = w.opt.Now().UnixMilli()
	}
	return w.frame("", &fin)
}

// Abort ends a run that stopped without finishing (a cancel, a middleware
// abort, a lost client). In the agui profile it writes one RUN_ERROR with
// reason and code (default "aborted") unless a terminal event was already
// written; the tanstack profile writes nothing, as 0.58.0 does.
func (w *Writer) Abort(reason, code string) error {
	if w.opt.Profile != ProfileAGUI || w.terminal {
		return nil
	}
	w.held = nil
	if code == "" {
		code = "aborted"
	}
	if reason == "" {
		reason = "Request aborted"
	}
	re := Event{Type: RunError, Message: reason, Code: code, Timestamp: w.opt.Now().UnixMilli()}
	if err := w.ensureStarted(); err != nil {
		return err
	}
	w.terminal = true
	return w.frame("", &re)
}

// Terminated reports whether a terminal event has been written (agui profile).
func (w *Writer) Terminated() bool { return w.terminal }

func (w *Writer) frame(id string, e *Event) error {
	if w.opt.Emit != nil {
		// The writer's own copy, so that the caller's event never escapes
		// through the callback (that would cost every Write a heap copy
		// on the byte path too), and one copy per writer, not per event.
		if w.emitted == nil {
			w.emitted = new(Event)
		}
		*w.emitted = *e
		w.buf = AppendWire(w.buf[:0], e)
		return w.opt.Emit(w.emitted, w.buf)
	}
	b := appendFrameHead(w.buf[:0], w.opt.Format, id)
	b = AppendWire(b, e)
	b = appendFrameTail(b, w.opt.Format, id)
	w.buf = b
	_, err := w.w.Write(b)
	return err
}

// AppendSSE appends one SSE frame for e to dst (no profile logic).
func AppendSSE(dst []byte, id string, e *Event) []byte {
	dst = appendFrameHead(dst, SSE, id)
	dst = AppendWire(dst, e)
	return appendFrameTail(dst, SSE, id)
}

// AppendFrame appends one frame of format f holding data, an event already
// encoded as wire JSON (a durable log entry), with offset id: the SSE `id:`
// line or the NDJSON {"id","chunk"} envelope. An empty id writes a plain
// frame. It is the one framing shared by Writer and log replay.
func AppendFrame(dst []byte, f Format, id string, data []byte) []byte {
	dst = appendFrameHead(dst, f, id)
	dst = append(dst, data...)
	return appendFrameTail(dst, f, id)
}

func appendFrameHead(b []byte, f Format, id string) []byte {
	if f == NDJSON {
		if id != "" {
			b = append(b, `{"id":`...)
			b = appendString(b, id)
			b = append(b, `,"chunk":`...)
		}
		return b
	}
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	return append(b, "data: "...)
}

func appendFrameTail(b []byte, f Format, id string) []byte {
	if f == NDJSON {
		if id != "" {
			b = append(b, '}')
		}
		return append(b, '\n')
	}
	return append(b, '\n', '\n')
}

// ErrTruncated reports a stream that ended in the middle of a frame.
var ErrTruncated = errors.New("agui: stream truncated mid-frame")

// Frame is one decoded wire frame.
type Frame struct {
	ID    string // SSE id: line or NDJSON envelope id; "" when absent
	Event Event
	Data  []byte // the raw JSON of the event
}

// MaxFrameSize bounds one frame so a hostile stream cannot exhaust memory.
const MaxFrameSize = 32 << 20

// ReadSSE decodes an SSE stream the way the TanStack client
// (@tanstack/ai-client 0.33) does, line by line: every non-blank line that
// is not a comment, `event:`, `retry:` or `id:` line holds one whole event
// (the `data:` prefix and one space after it are optional; an event is never
// split over several data lines). An `id:` line names the next event only.
// A `data: [DONE]` line ends the stream with a synthesized RUN_FINISHED that
// carries the thread and run ids last seen and metadata.tanstack.finishReason
// "stop". A stream whose last line has no newline yields ErrTruncated; a line
// that is not a JSON event is an error. Events are as decoded; call Restore
// for the client's view.
func ReadSSE(r io.Reader) iter.Seq2[Frame, error] {
	return func(yield func(Frame, error) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		var id string
		var hasID bool
		var threadID, runID, model string
		for lineNo := 1; ; lineNo++ {
			line, err := readLine(br)
			if err != nil && err != io.EOF {
				yield(Frame{}, fmt.Errorf("agui: reading SSE: %w", err))
				return
			}
			if err == io.EOF {
				if len(bytes.TrimSpace(line)) > 0 {
					yield(Frame{}, fmt.Errorf("%w: SSE line %d has no newline", ErrTruncated, lineNo))
				}
				return
			}
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte{'\n'}), []byte{'\r'})
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			switch {
			case string(line) == "id" || bytes.HasPrefix(line, []byte("id:")):
				id, hasID = string(bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("id")), []byte(":"))), true
				id = strings.TrimPrefix(id, " ")
				continue
			case line[0] == ':' || bytes.HasPrefix(line, []byte("event:")) || bytes.HasPrefix(line, []byte("retry:")):
				continue
			}
			data := line
			if bytes.HasPrefix(data, []byte("data:")) {
				data = bytes.TrimPrefix(data[5:], []byte{' '})
			}
			if string(data) == "[DONE]" {
				ts := map[string]any{"finishReason": FinishStop}
				if model != "" {
					ts["model"] = model
				}
				done := Event{Type: RunFinished, ThreadID: threadID, RunID: runID, Timestamp: time.Now().UnixMilli(),
					Metadata: map[string]any{"tanstack": ts}}
				yield(Frame{Event: done}, nil)
				return
			}
			f := Frame{Data: append([]byte(nil), data...)}
			if hasID {
				f.ID, id, hasID = id, "", false
			}
			if err := f.Event.UnmarshalJSON(f.Data); err != nil {
				yield(Frame{}, fmt.Errorf("agui: SSE line %d: %w", lineNo, err))
				return
			}
			// The client reads these after restoring the chunk, so
			// metadata.tanstack counts too.
			ts := f.Event.TanstackMeta()
			if v, ok := ts["threadId"].(string); ok && f.Event.ThreadID == "" {
				threadID = v
			} else if f.Event.ThreadID != "" {
				threadID = f.Event.ThreadID
			}
			if v, ok := ts["runId"].(string); ok && f.Event.RunID == "" {
				runID = v
			} else if f.Event.RunID != "" {
				runID = f.Event.RunID
			}
			if m, ok := ts["model"].(string); ok {
				model = m
			}
			if !yield(f, nil) {
				return
			}
		}
	}
}

// ReadNDJSON decodes an NDJSON stream: one event per line, bare or in the
// durable {"id","chunk"} envelope. A final line without a newline yields
// ErrTruncated.
func ReadNDJSON(r io.Reader) iter.Seq2[Frame, error] {
	return func(yield func(Frame, error) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		lineNo := 0
		for {
			line, err := readLine(br)
			if len(line) > 0 || err == nil {
				lineNo++
			}
			if err != nil && err != io.EOF {
				yield(Frame{}, fmt.Errorf("agui: reading NDJSON: %w", err))
				return
			}
			if err == io.EOF {
				if len(bytes.TrimSpace(line)) > 0 {
					yield(Frame{}, fmt.Errorf("%w: NDJSON line %d has no newline", ErrTruncated, lineNo))
				}
				return
			}
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			f, perr := decodeNDJSONLine(line)
			if perr != nil {
				yield(Frame{}, fmt.Errorf("agui: NDJSON line %d: %w", lineNo, perr))
				return
			}
			if !yield(f, nil) {
				return
			}
		}
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > MaxFrameSize {
			return nil, fmt.Errorf("line exceeds %d bytes", MaxFrameSize)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return out, err
		}
		return out, nil
	}
}

func decodeNDJSONLine(line []byte) (Frame, error) {
	var env struct {
		ID    json.RawMessage `json:"id"`
		Chunk json.RawMessage `json:"chunk"`
		Type  json.RawMessage `json:"type"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		return Frame{}, err
	}
	f := Frame{}
	data := line
	if env.Type == nil && env.Chunk != nil {
		data = env.Chunk
		var s string
		if json.Unmarshal(env.ID, &s) == nil {
			f.ID = s
		} else {
			f.ID = string(env.ID)
		}
	}
	f.Data = append([]byte(nil), data...)
	if err := f.Event.UnmarshalJSON(f.Data); err != nil {
		return Frame{}, err
	}
	return f, nil
}
