package openai_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/internal/pipenet"
	"github.com/loomkit/loom/model/openai"
)

// TestStatusFaults: every documented status maps to its Kind, for
// blocking and streaming calls alike (ADVERSARIAL 5, 8, 13).
func TestStatusFaults(t *testing.T) {
	cases := []struct {
		status    int
		body      string
		headers   []string
		kind      model.Kind
		retryable bool
	}{
		{400, `{"error":{"message":"Invalid 'messages'","type":"invalid_request_error","param":"messages","code":null}}`, nil, model.KindBadRequest, false},
		{401, `{"error":{"message":"Incorrect API key provided: sk-abc***xyz","type":"invalid_request_error","code":"invalid_api_key"}}`, nil, model.KindAuth, false},
		{403, `{"error":{"message":"Country, region, or territory not supported","type":"request_forbidden","code":"unsupported_country_region_territory"}}`, nil, model.KindPermission, false},
		{404, `{"error":{"message":"The model 'gpt-9' does not exist","type":"invalid_request_error","code":"model_not_found"}}`, nil, model.KindNotFound, false},
		{408, ``, nil, model.KindTimeout, true},
		{409, `{"error":{"message":"lock timeout"}}`, nil, model.KindServer, true},
		{413, `<html><body>413 Request Entity Too Large</body></html>`, []string{"Content-Type", "text/html"}, model.KindRequestTooLarge, false},
		{422, `{"detail":[{"loc":["body","messages"],"msg":"field required"}]}`, nil, model.KindBadRequest, false},
		{429, `{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","code":"rate_limit_exceeded"}}`, []string{"retry-after", "2"}, model.KindRateLimited, true},
		{429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}`, nil, model.KindQuota, false},
		{400, `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`, nil, model.KindContextTooLong, false},
		{500, `{"error":{"message":"The server had an error","type":"server_error"}}`, nil, model.KindServer, true},
		{500, `{"error":{"message":"no"}}`, []string{"x-should-retry", "false"}, model.KindServer, false},
		{400, `{"error":{"message":"try again"}}`, []string{"x-should-retry", "true"}, model.KindBadRequest, true},
		{502, `<html><head><title>502 Bad Gateway</title></head></html>`, []string{"Content-Type", "text/html"}, model.KindServer, true},
		{503, `{"error":{"message":"The engine is currently overloaded","type":"server_error"}}`, nil, model.KindServer, true},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, nil, model.KindOverloaded, true},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%d %s", c.status, c.kind)
		t.Run(name, func(t *testing.T) {
			h := append([]string{"x-request-id", "req_f"}, c.headers...)
			handler := func(w http.ResponseWriter, r *http.Request) {
				for i := 0; i+1 < len(h); i += 2 {
					w.Header().Set(h[i], h[i+1])
				}
				if w.Header().Get("Content-Type") == "" {
					w.Header().Set("Content-Type", "application/json")
				}
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			}
			m, f := start(t, openai.Config{}, handler)
			_, gerr := m.Generate(bg, userReq("q"))
			_, evs, serr := collect(m.Stream(bg, userReq("q")))
			for how, err := range map[string]error{"generate": gerr, "stream": serr} {
				var e *model.Error
				if !errors.As(err, &e) {
					t.Fatalf("%s: %v is no *model.Error", how, err)
				}
				if e.Kind != c.kind || e.Status != c.status || e.RequestID != "req_f" || e.Retryable() != c.retryable || len(e.Raw) == 0 && c.body != "" {
					t.Errorf("%s: %+v", how, e)
				}
			}
			if len(evs) != 0 || len(f.requests()) != 2 {
				t.Errorf("events %v, %d requests", evs, len(f.requests()))
			}
			if c.status == 413 && !strings.Contains(gerr.Error(), "compact") {
				t.Errorf("413 does not say to compact: %v", gerr)
			}
		})
	}
}

func TestTransportFaults(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		m := openai.New(openai.Config{Model: "m", BaseURL: "http://" + addr})
		if _, err := m.Generate(bg, userReq("q")); kindOf(err) != model.KindNetwork {
			t.Fatalf("generate: %v", err)
		}
		if _, _, err := collect(m.Stream(bg, userReq("q"))); kindOf(err) != model.KindNetwork {
			t.Fatalf("stream: %v", err)
		}
	})
	t.Run("caller cancel", func(t *testing.T) {
		m, _ := start(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		var err error
		for _, e := range m.Stream(ctx, userReq("q")) {
			if e != nil {
				err = e
				break
			}
			cancel()
		}
		var me *model.Error
		if !errors.Is(err, context.Canceled) || errors.As(err, &me) {
			t.Fatalf("got %v", err)
		}
	})
}

// retryServer answers request i with steps[i] (the last repeating) and
// records when each request came, its body and attempt header.
type retryServer struct {
	mu      sync.Mutex
	steps   []http.HandlerFunc
	times   []time.Time
	bodies  [][]byte
	counter []string
}

func (s *retryServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.times)
	s.times = append(s.times, time.Now())
	s.bodies = append(s.bodies, body)
	s.counter = append(s.counter, r.Header.Get("X-Stainless-Retry-Count"))
	h := s.steps[min(n, len(s.steps)-1)]
	s.mu.Unlock()
	h(w, r)
}

func (s *retryServer) gaps() []time.Duration {
	var g []time.Duration
	for i := 1; i < len(s.times); i++ {
		g = append(g, s.times[i].Sub(s.times[i-1]))
	}
	return g
}

const okBody = `{"id":"ok","choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}`

// withRetry runs f in a synctest bubble against steps, through Retry.
func withRetry(t *testing.T, p model.RetryPolicy, steps []http.HandlerFunc, f func(t *testing.T, m model.Model, s *retryServer)) {
	synctest.Test(t, func(t *testing.T) {
		s := &retryServer{steps: steps}
		client, stop := pipenet.Serve(s)
		defer stop()
		m := model.Retry(p)(openai.New(openai.Config{Model: "m", BaseURL: "http://pipenet/v1", HTTPClient: client}))
		f(t, m, s)
	})
}

// TestRetryOverHTTP covers ADVERSARIAL 1-10 and 12 end to end: the
// adapter's errors drive the policy, on a fake clock.
func TestRetryOverHTTP(t *testing.T) {
	ok := jsonReply(200, okBody)
	t.Run("retry-after seconds", func(t *testing.T) {
		withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{jsonReply(429, `{"error":{"type":"requests","code":"rate_limit_exceeded"}}`, "retry-after", "2"), ok}, func(t *testing.T, m model.Model, s *retryServer) {
			if _, err := m.Generate(bg, userReq("q")); err != nil {
				t.Fatal(err)
			}
			if g := s.gaps(); len(g) != 1 || g[0] != 2*time.Second {
				t.Fatalf("gaps %v", g)
			}
			if strings.Join(s.counter, ",") != "0,1" || !bytes.Equal(s.bodies[0], s.bodies[1]) {
				t.Fatalf("counters %v, bodies equal %v", s.counter, bytes.Equal(s.bodies[0], s.bodies[1]))
			}
		})
	})
	t.Run("retry-after-ms wins", func(t *testing.T) {
		withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{jsonReply(429, `{}`, "retry-after-ms", "1500", "retry-after", "30"), ok}, func(t *testing.T, m model.Model, s *retryServer) {
			if _, err := m.Generate(bg, userReq("q")); err != nil {
				t.Fatal(err)
			}
			if g := s.gaps(); len(g) != 1 || g[0] != 1500*time.Millisecond {
				t.Fatalf("gaps %v", g)
			}
		})
	})
	t.Run("retry-after an hour fails fast", func(t *testing.T) {
		withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{jsonReply(429, `{}`, "retry-after", "3600"), ok}, func(t *testing.T, m model.Model, s *retryServer) {
			start := time.Now()
			_, err := m.Generate(bg, userReq("q"))
			var e *model.Error
			if !errors.As(err, &e) || e.Kind != model.KindRateLimited || e.RetryAfter != time.Hour || len(s.times) != 1 || time.Since(start) != 0 {
				t.Fatalf("%d requests: %v", len(s.times), err)
			}
		})
	})
	t.Run("garbage retry-after uses backoff", func(t *testing.T) {
		for _, v := range []string{"-5", "NaN", "inf", "abc", "Sun, 06 Nov 1994 08:49:37 GMT"} {
			withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{jsonReply(429, `{}`, "retry-after", v), ok}, func(t *testing.T, m model.Model, s *retryServer) {
				if _, err := m.Generate(bg, userReq("q")); err != nil {
					t.Fatal(err)
				}
				if g := s.gaps(); len(g) != 1 || g[0] > 500*time.Millisecond || g[0] < 375*time.Millisecond {
					t.Fatalf("retry-after %q: gaps %v", v, g)
				}
			})
		}
	})
	t.Run("quota is terminal", func(t *testing.T) {
		withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{jsonReply(429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`), ok}, func(t *testing.T, m model.Model, s *retryServer) {
			if _, err := m.Generate(bg, userReq("q")); kindOf(err) != model.KindQuota || len(s.times) != 1 {
				t.Fatalf("%d requests: %v", len(s.times), err)
			}
		})
	})
	t.Run("529 twice then success", func(t *testing.T) {
		overloaded := jsonReply(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{overloaded, overloaded, ok}, func(t *testing.T, m model.Model, s *retryServer) {
			if _, err := m.Generate(bg, userReq("q")); err != nil || len(s.times) != 3 {
				t.Fatalf("%d requests: %v", len(s.times), err)
			}
		})
	})
	t.Run("529 forever within budget", func(t *testing.T) {
		overloaded := jsonReply(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		withRetry(t, model.RetryPolicy{Budget: 2 * time.Second}, []http.HandlerFunc{overloaded}, func(t *testing.T, m model.Model, s *retryServer) {
			start := time.Now()
			_, err := m.Generate(bg, userReq("q"))
			if kindOf(err) != model.KindOverloaded || time.Since(start) > 2*time.Second {
				t.Fatalf("after %v, %d requests: %v", time.Since(start), len(s.times), err)
			}
		})
	})
	t.Run("x-should-retry both ways", func(t *testing.T) {
		withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{jsonReply(500, `{}`, "x-should-retry", "false"), ok}, func(t *testing.T, m model.Model, s *retryServer) {
			if _, err := m.Generate(bg, userReq("q")); kindOf(err) != model.KindServer || len(s.times) != 1 {
				t.Fatalf("500+false: %d requests: %v", len(s.times), err)
			}
		})
		withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{jsonReply(400, `{}`, "x-should-retry", "true"), ok}, func(t *testing.T, m model.Model, s *retryServer) {
			if _, err := m.Generate(bg, userReq("q")); err != nil || len(s.times) != 2 {
				t.Fatalf("400+true: %d requests: %v", len(s.times), err)
			}
		})
	})
	t.Run("one attempt for client errors", func(t *testing.T) {
		for _, status := range []int{400, 401, 403, 404, 413} {
			withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{jsonReply(status, `{}`), ok}, func(t *testing.T, m model.Model, s *retryServer) {
				if _, err := m.Generate(bg, userReq("q")); err == nil || len(s.times) != 1 {
					t.Fatalf("%d: %d requests: %v", status, len(s.times), err)
				}
			})
		}
	})
	t.Run("408 and 409 retried", func(t *testing.T) {
		for _, status := range []int{408, 409} {
			withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{jsonReply(status, `{}`), ok}, func(t *testing.T, m model.Model, s *retryServer) {
				if _, err := m.Generate(bg, userReq("q")); err != nil || len(s.times) != 2 {
					t.Fatalf("%d: %d requests: %v", status, len(s.times), err)
				}
			})
		}
	})
	t.Run("cancel during backoff", func(t *testing.T) {
		withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{jsonReply(429, `{}`, "retry-after", "30"), ok}, func(t *testing.T, m model.Model, s *retryServer) {
			ctx, cancel := context.WithCancel(bg)
			time.AfterFunc(time.Second, cancel)
			start := time.Now()
			_, err := m.Generate(ctx, userReq("q"))
			if !errors.Is(err, context.Canceled) || time.Since(start) != time.Second {
				t.Fatalf("after %v: %v", time.Since(start), err)
			}
			time.Sleep(time.Minute)
			if len(s.times) != 1 {
				t.Fatalf("%d requests", len(s.times))
			}
		})
	})
	t.Run("stream overload before output is retried", func(t *testing.T) {
		// ADVERSARIAL 17, first half.
		steps := []http.HandlerFunc{
			sseReply("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"),
			sseReply(events(`{"id":"s","choices":[{"index":0,"delta":{"content":"fine"},"finish_reason":"stop"}]}`)),
		}
		withRetry(t, model.RetryPolicy{}, steps, func(t *testing.T, m model.Model, s *retryServer) {
			resp, _, err := collect(m.Stream(bg, userReq("q")))
			if err != nil || resp.Text() != "fine" || len(s.times) != 2 {
				t.Fatalf("%d requests: %+v %v", len(s.times), resp, err)
			}
		})
	})
	t.Run("stream overload after output surfaces", func(t *testing.T) {
		// ADVERSARIAL 17, second half: three visible deltas, then the error.
		body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c\"}}]}\n\n" +
			"data: {\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
		withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{sseReply(body)}, func(t *testing.T, m model.Model, s *retryServer) {
			resp, _, err := collect(m.Stream(bg, userReq("q")))
			if kindOf(err) != model.KindOverloaded || resp.Text() != "abc" || !resp.Truncated || len(s.times) != 1 {
				t.Fatalf("%d requests: %+v %v", len(s.times), resp, err)
			}
		})
	})
	t.Run("connection reset before headers replays the body", func(t *testing.T) {
		// ADVERSARIAL 10.
		reset := func(w http.ResponseWriter, r *http.Request) {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
		}
		withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{reset, ok}, func(t *testing.T, m model.Model, s *retryServer) {
			req := roundTrip()
			if _, err := m.Generate(bg, req); err != nil {
				t.Fatal(err)
			}
			if len(s.bodies) != 2 || !bytes.Equal(s.bodies[0], s.bodies[1]) || len(s.bodies[0]) == 0 {
				t.Fatalf("%d requests; bodies equal: %v", len(s.bodies), len(s.bodies) == 2 && bytes.Equal(s.bodies[0], s.bodies[1]))
			}
		})
	})
	t.Run("observer sees each retry", func(t *testing.T) {
		fail := jsonReply(503, `{}`)
		withRetry(t, model.RetryPolicy{}, []http.HandlerFunc{fail, fail, ok}, func(t *testing.T, m model.Model, s *retryServer) {
			var seen []model.RetryInfo
			ctx := model.WithRetryObserver(bg, func(i model.RetryInfo) { seen = append(seen, i) })
			if _, err := m.Generate(ctx, userReq("q")); err != nil {
				t.Fatal(err)
			}
			if len(seen) != 2 || seen[0].Attempt != 1 || seen[1].Attempt != 2 || kindOf(seen[0].Err) != model.KindServer {
				t.Fatalf("seen %+v", seen)
			}
			if strings.Join(s.counter, ",") != "0,1,2" {
				t.Fatalf("counters %v", s.counter)
			}
		})
	})
}
