package wire

import (
	"context"
	"iter"

	"github.com/goai-sdk/goai/agui"
	"github.com/goai-sdk/goai/chat"
)

// Parser turns one response stream's payloads into events on the emitter
// it was built with. A provider is a request builder plus a Parser.
type Parser interface {
	// Feed handles one SSE data payload or one NDJSON line. An error means
	// the payload could not be decoded; the turn then fails.
	Feed(data []byte) error
	// End is called when the stream ends cleanly before a terminal event.
	// It finishes the turn and returns true if the stream may end there
	// (a provider without an explicit end marker); false makes the turn an
	// incomplete stream.
	End() bool
}

// Framing is how a response body is split into payloads.
type Framing uint8

// Framings.
const (
	SSE    Framing = iota // text/event-stream data payloads
	NDJSON                // one JSON value per line
)

// Provider describes one adapter to Stream: how to build the HTTP request
// for a turn and how to parse its response.
type Provider struct {
	// Name prefixes malformed-payload errors ("openai", "anthropic", ...).
	Name string
	// Model is the configured model, reported until the provider names one.
	Model string
	// Options is the transport (base URL, key, client, retries).
	Options *Options
	// Framing splits the response body.
	Framing Framing
	// EagerStart sends RUN_STARTED with the configured model before the
	// request; otherwise it waits for the first payload so it can carry
	// the model name the provider reports.
	EagerStart bool
	// Build returns the request for a turn; an error fails the turn with
	// code "invalid_request" after RUN_STARTED.
	Build func(req *chat.Request) (*Request, error)
	// Parser returns the parser for one turn.
	Parser func(em *Emitter) Parser
}

// Stream runs one turn of p for req: RUN_STARTED, the request (retried
// before the first byte as Do does), the response parsed payload by
// payload, and exactly one terminal event, unless the consumer stops or
// ctx is cancelled (then nothing more is emitted).
func Stream(ctx context.Context, p *Provider, req *chat.Request) iter.Seq2[agui.Event, error] {
	return func(yield func(agui.Event, error) bool) {
		em := NewEmitter(yield, req, p.Model)
		em.Secret = p.Options.Key()
		if p.EagerStart {
			if !em.Start() {
				return
			}
			em.modelPending = true
		} else if !em.StartLater() {
			return
		}
		hr, err := p.Build(req)
		if err != nil {
			em.Fail("invalid_request", err.Error(), nil)
			return
		}
		resp, err := Do(ctx, p.Options, hr)
		if err != nil {
			if ctx.Err() == nil {
				em.FailErr(err)
			}
			return
		}
		defer resp.Close()
		drive(ctx, em, p, resp)
	}
}

func drive(ctx context.Context, em *Emitter, p *Provider, resp *Response) {
	parser := p.Parser(em)
	var next func() ([]byte, error)
	if p.Framing == NDJSON {
		next = NewLineReader(resp.Body).Next
	} else {
		sse := NewSSEReader(resp.Body)
		next = func() ([]byte, error) {
			_, data, err := sse.Next()
			return data, err
		}
	}
	for !em.Stopped() {
		data, err := next()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			err = NotEOF(err)
			if err == nil && parser.End() {
				return
			}
			if !em.Done() {
				em.Incomplete(err)
			}
			return
		}
		if err := parser.Feed(data); err != nil {
			em.Fail("invalid_response", p.Name+": malformed stream payload: "+err.Error(), nil)
			return
		}
	}
}
