// Package wire holds what the provider adapters share: the drive loop
// (Stream), the HTTP transport with retries before the first byte, the SSE
// and NDJSON readers, the AG-UI turn emitter that enforces the adapter
// grammar (RUN_STARTED, text/reasoning/tool events, one terminal event),
// and small JSON helpers for the hot decode path.
//
// A new provider is a Provider value: Build turns a chat.Request into the
// HTTP request, and Parser returns a Parser whose Feed translates one
// payload into Emitter calls. Its ChatStream is wire.Stream(ctx, p, req);
// its tests run wiretest's golden, transport and fuzz helpers.
package wire

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options configures a provider adapter's transport. The zero value (or a
// nil *Options) means the provider's defaults.
type Options struct {
	// BaseURL replaces the provider's default endpoint root, for example
	// "http://127.0.0.1:8080/v1" for a mock or a compatible server.
	BaseURL string
	// APIKey authenticates requests. It is sent only in a header and never
	// appears in errors, events or logs.
	APIKey string
	// HTTPClient is the client to use; nil means a client without a total
	// timeout (a stream may last minutes; cancel the context instead).
	HTTPClient *http.Client
	// Headers are added to every request (after the provider's own).
	Headers http.Header
	// MaxRetries is how many times a request is retried on 429, 5xx or a
	// connection failure before the first response byte. 0 means 2;
	// negative means never.
	MaxRetries int
	// RetryBaseDelay is the first backoff step (doubled each retry, with
	// full jitter, capped at RetryMaxDelay); 0 means 500ms.
	RetryBaseDelay time.Duration
	// RetryMaxDelay caps one backoff wait, including a Retry-After the
	// server asks for; 0 means 20s.
	RetryMaxDelay time.Duration
}

// Retries is the effective retry count.
func (o *Options) Retries() int {
	if o == nil || o.MaxRetries == 0 {
		return 2
	}
	if o.MaxRetries < 0 {
		return 0
	}
	return o.MaxRetries
}

func (o *Options) client() *http.Client {
	if o != nil && o.HTTPClient != nil {
		return o.HTTPClient
	}
	return http.DefaultClient
}

// Key returns the API key or "".
func (o *Options) Key() string {
	if o == nil {
		return ""
	}
	return o.APIKey
}

// Base returns the base URL or def, without a trailing slash.
func (o *Options) Base(def string) string {
	if o != nil && o.BaseURL != "" {
		return strings.TrimRight(o.BaseURL, "/")
	}
	return def
}

// StatusError is a provider's HTTP error status with its message.
type StatusError struct {
	Status  int
	Message string
	Type    string // provider error type, when it says
}

func (e *StatusError) Error() string {
	return "provider returned HTTP " + strconv.Itoa(e.Status) + ": " + e.Message
}

// ConnError is a transport failure (no usable response).
type ConnError struct{ Msg string }

func (e *ConnError) Error() string { return e.Msg }

// Request is one streaming call.
type Request struct {
	Method  string // default POST
	URL     string
	Headers http.Header // provider headers (auth, version)
	Body    []byte
	// ErrorMessage extracts the provider's message from an error body;
	// nil uses DefaultErrorMessage.
	ErrorMessage func(body []byte) (msg, typ string)
}

// Response is a successful (2xx) response whose first byte has arrived.
type Response struct {
	Status int
	Header http.Header
	Body   *bufio.Reader
	closer io.Closer
}

// Close closes the body; it is safe to call more than once.
func (r *Response) Close() error {
	if r.closer == nil {
		return nil
	}
	c := r.closer
	r.closer = nil
	return c.Close()
}

// retryable statuses: rate limits, overloads and gateway failures.
func retryableStatus(s int) bool {
	return s == http.StatusTooManyRequests || s == http.StatusRequestTimeout || s == 409 || (s >= 500 && s != 501 && s != 505)
}

// Do sends req and returns once the first byte of a 2xx body has arrived.
// A 429/5xx status, a connection failure, or a reset before the first byte
// is retried with exponential backoff and full jitter (Retry-After is
// honoured, capped); nothing is ever retried once the first byte has been
// handed to the caller, so streamed output is never duplicated. The error
// is a *StatusError, a *ConnError or the context's error; it never
// contains the API key or the request URL's query.
func Do(ctx context.Context, o *Options, req *Request) (*Response, error) {
	retries := o.Retries()
	base, maxd := 500*time.Millisecond, 20*time.Second
	if o != nil && o.RetryBaseDelay > 0 {
		base = o.RetryBaseDelay
	}
	if o != nil && o.RetryMaxDelay > 0 {
		maxd = o.RetryMaxDelay
	}
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	var lastErr error
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var wait time.Duration
		resp, err := attemptOnce(ctx, o, method, req)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		lastErr = err
		var se *retryStatus
		switch {
		case errors.As(err, &se):
			lastErr = se.err
			if !retryableStatus(se.err.Status) {
				return nil, se.err
			}
			wait = se.after
		case isConnErr(err):
		default:
			return nil, err
		}
		if attempt >= retries {
			if ce, ok := lastErr.(*ConnError); ok {
				return nil, ce
			}
			return nil, lastErr
		}
		d := backoff(base, maxd, attempt)
		if wait > 0 {
			d = min(wait, maxd)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

type retryStatus struct {
	err   *StatusError
	after time.Duration
}

func (r *retryStatus) Error() string { return r.err.Error() }

func backoff(base, maxd time.Duration, attempt int) time.Duration {
	d := base << min(attempt, 16)
	if d > maxd || d <= 0 {
		d = maxd
	}
	// full jitter over [d/2, d)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

func isConnErr(err error) bool {
	var ce *ConnError
	return errors.As(err, &ce)
}

func attemptOnce(ctx context.Context, o *Options, method string, req *Request) (*Response, error) {
	hr, err := http.NewRequestWithContext(ctx, method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return nil, &ConnError{Msg: "invalid request: " + scrubURL(err)}
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream, application/x-ndjson, application/json")
	for k, vs := range req.Headers {
		hr.Header[k] = vs
	}
	if o != nil {
		for k, vs := range o.Headers {
			hr.Header[http.CanonicalHeaderKey(k)] = vs
		}
	}
	resp, err := o.client().Do(hr)
	if err != nil {
		return nil, &ConnError{Msg: "connection failed: " + scrubURL(err)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		extract := req.ErrorMessage
		if extract == nil {
			extract = DefaultErrorMessage
		}
		msg, typ := extract(data)
		if msg == "" {
			msg = strings.TrimSpace(string(data))
			if msg == "" {
				msg = http.StatusText(resp.StatusCode)
			}
			if len(msg) > 500 {
				msg = msg[:500]
			}
		}
		se := &StatusError{Status: resp.StatusCode, Message: Redact(msg, o.Key()), Type: typ}
		return nil, &retryStatus{err: se, after: retryAfter(resp.Header)}
	}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	if _, err := br.Peek(1); err != nil && err != io.EOF {
		resp.Body.Close()
		return nil, &ConnError{Msg: "connection failed before the first byte: " + scrubURL(err)}
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: br, closer: resp.Body}, nil
}

func retryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// scrubURL renders a transport error without the request URL (which may
// carry credentials in a query) and classifies resets.
func scrubURL(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by peer"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed unexpectedly"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return err.Error()
}

// Redact replaces every occurrence of key in s.
func Redact(s, key string) string {
	if key == "" || len(key) < 4 || !strings.Contains(s, key) {
		return s
	}
	return strings.ReplaceAll(s, key, "[REDACTED]")
}

// DefaultErrorMessage reads {"error":{"message","type"|"code"|"status"}},
// {"error":"..."} or {"message":"..."}.
func DefaultErrorMessage(body []byte) (string, string) {
	var v struct {
		Error   any    `json:"error"`
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	if err := jsonUnmarshal(body, &v); err != nil {
		return "", ""
	}
	switch e := v.Error.(type) {
	case string:
		return e, v.Type
	case map[string]any:
		msg, _ := e["message"].(string)
		typ, _ := e["type"].(string)
		if typ == "" {
			typ, _ = e["status"].(string)
		}
		if typ == "" {
			if c, ok := e["code"].(string); ok {
				typ = c
			}
		}
		return msg, typ
	}
	return v.Message, v.Type
}
