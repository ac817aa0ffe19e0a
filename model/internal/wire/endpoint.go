package wire

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/loomkit/loom/model"
)

// Endpoint builds the requests of one adapter to one URL with fixed
// headers: what NewRequest builds, with the URL parsed and the headers
// prepared once instead of for every request. Requests share the header
// value slices, which are never changed in place (http.Header's methods
// replace or reallocate them). An Endpoint is safe for concurrent use.
type Endpoint struct {
	url    url.URL
	host   string
	header http.Header // h, then Content-Type, each value slice clipped
	err    error
}

// attemptValues holds the AttemptHeader values of the first attempts.
var attemptValues = func() (v [16][]string) {
	for i := range v {
		v[i] = []string{strconv.Itoa(i)}
	}
	return v
}()

// NewEndpoint prepares requests to rawURL with the headers of h (copied).
// A URL that cannot be parsed makes every Request fail with the error
// NewRequest would give.
func NewEndpoint(rawURL string, h http.Header) *Endpoint {
	e := &Endpoint{}
	req, err := http.NewRequest(http.MethodPost, rawURL, nil)
	if err != nil {
		e.err = err
		return e
	}
	e.url, e.host = *req.URL, req.Host
	e.header = make(http.Header, len(h)+1)
	for k, vs := range h {
		e.header[k] = slices.Clip(slices.Clone(vs))
	}
	e.header.Set("Content-Type", "application/json")
	return e
}

// Request returns a POST of body under ctx, as NewRequest(ctx, url, body,
// h) does: replayable body, the headers, Content-Type application/json
// and the attempt number from model.RetryAttempt in AttemptHeader.
func (e *Endpoint) Request(ctx context.Context, body []byte) (*http.Request, error) {
	if e.err != nil {
		return nil, e.err
	}
	// An empty URL parses at no cost; the prepared one replaces it.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", nil)
	if err != nil {
		return nil, err
	}
	u := e.url
	req.URL, req.Host = &u, e.host
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.ContentLength = int64(len(body))
	if len(body) == 0 {
		req.Body = http.NoBody // as NewRequest has it
	}
	h := make(http.Header, len(e.header)+1)
	for k, vs := range e.header {
		h[k] = vs
	}
	if n := model.RetryAttempt(ctx); n >= 0 && n < len(attemptValues) {
		h[AttemptHeader] = attemptValues[n]
	} else {
		h[AttemptHeader] = []string{strconv.Itoa(n)}
	}
	req.Header = h
	return req, nil
}
