package mcpclient

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
)

// limitTransport adds the configured headers to every request and bounds
// JSON response bodies, which the SDK reads whole (event streams are
// bounded per event by the SDK itself).
type limitTransport struct {
	base   http.RoundTripper
	header http.Header
	max    int64
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		req = req.Clone(req.Context())
		for k, vs := range t.header {
			req.Header.Del(k)
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		resp.Body = &limitedBody{rc: resp.Body, left: t.max}
	}
	return resp, nil
}

// limitedBody fails a read past its limit instead of truncating silently.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

var errTooLarge = fmt.Errorf("response larger than the message limit")

// redactURL drops credentials and the query from u for messages.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "the configured URL"
	}
	p.User = nil
	p.RawQuery = ""
	p.Fragment = ""
	return p.String()
}
