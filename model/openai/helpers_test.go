package openai_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/openai"
)

// recorded is one request the test server received.
type recorded struct {
	Path   string
	Header http.Header
	Body   []byte
}

// fake is a scripted Chat Completions server: request i is answered by
// handlers[i], the last handler answering all requests after it.
type fake struct {
	mu       sync.Mutex
	reqs     []recorded
	handlers []http.HandlerFunc
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	h := f.handlers[min(n, len(f.handlers)-1)]
	f.mu.Unlock()
	h(w, r)
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// start serves handlers over loopback HTTP and returns a Model for it.
func start(t *testing.T, cfg openai.Config, handlers ...http.HandlerFunc) (*openai.Model, *fake) {
	t.Helper()
	f := &fake{handlers: handlers}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg.BaseURL = srv.URL + "/v1"
	cfg.HTTPClient = srv.Client()
	if cfg.Model == "" {
		cfg.Model = "gpt-test"
	}
	return openai.New(cfg), f
}

// jsonReply answers with status and a JSON body (and extra headers as
// key, value pairs).
func jsonReply(status int, body string, headers ...string) http.HandlerFunc {
	return reply(status, "application/json", body, headers...)
}

func reply(status int, contentType, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// sseReply streams body as text/event-stream, flushing after every event.
func sseReply(body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for _, ev := range strings.SplitAfter(body, "\n\n") {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}
}

// events renders chunks as an SSE body ending with [DONE].
func events(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// collect ranges a stream, folding it, and returns the fold, the events
// and the final error.
func collect(seq func(func(llm.Event, error) bool)) (llm.Response, []llm.Event, error) {
	var acc llm.Accumulator
	var evs []llm.Event
	for ev, err := range seq {
		if err != nil {
			return acc.Response(), evs, err
		}
		evs = append(evs, ev)
		acc.Add(ev)
	}
	return acc.Response(), evs, nil
}

func userReq(text string) llm.Request {
	return llm.Request{Messages: []llm.Message{llm.UserText(text)}}
}

func kindOf(err error) model.Kind { return model.KindOf(err) }

var bg = context.Background()

var errDeadline = context.DeadlineExceeded

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
