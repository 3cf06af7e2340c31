package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/goai-sdk/goai/agui"
)

// apiError is the body of every error response.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// writeError answers {"error": msg, "code": code} with status.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Error: msg, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the response failed","code":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// isJSON reports whether a Content-Type names JSON. Browsers cannot send it
// cross-origin without a CORS preflight, which is what makes it a CSRF
// defence.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// readBody reads a request body of at most limit bytes, answering 413 or 400
// itself on failure.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, bool) {
	// A body that has not arrived within timeout is cut: only then is the
	// connection's read deadline touched (a deadline left set would end a
	// long response stream's context once it passed).
	rc := http.NewResponseController(w)
	timer := time.AfterFunc(timeout, func() { _ = rc.SetReadDeadline(time.Now()) })
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if !timer.Stop() && err == nil {
		err = os.ErrDeadlineExceeded // it fired: the connection's deadline is spent
	}
	if err != nil {
		// The rest of the body is not worth waiting for: the connection
		// closes after the answer.
		w.Header().Set("Connection", "close")
		if isTimeout(err) {
			writeError(w, http.StatusRequestTimeout, "body_timeout", "the request body was not received in time")
			return nil, false
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
			return nil, false
		}
		writeError(w, http.StatusBadRequest, "bad_body", "reading request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// decodeJSONBody decodes a small JSON body into v, answering 400 itself.
func decodeJSONBody(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	body, ok := readBody(w, r, limit, DefaultBodyTimeout)
	if !ok {
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "body is not the expected JSON object: "+err.Error())
		return false
	}
	return true
}

func setStreamHeaders(w http.ResponseWriter, format agui.Format) {
	hd := w.Header()
	hd.Set("Content-Type", format.ContentType())
	hd.Set("Cache-Control", "no-cache")
	if format == agui.SSE {
		hd.Set("Connection", "keep-alive")
	}
	hd.Set("X-Accel-Buffering", "no")
}

// acceptFormat picks the wire format: NDJSON when the request accepts
// application/x-ndjson or asks for ?format=ndjson (the TanStack client's
// fetchHttpStream sends no Accept header, so point it at
// /api/chat?format=ndjson), else SSE.
func acceptFormat(r *http.Request) agui.Format {
	if strings.Contains(r.Header.Get("Accept"), "application/x-ndjson") || r.URL.Query().Get("format") == "ndjson" {
		return agui.NDJSON
	}
	return agui.SSE
}

// clientIP is the remote address without its port.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
