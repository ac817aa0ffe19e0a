package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/internal/pipenet"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   model.Kind
	}{
		{400, `{"error":{"type":"invalid_request_error","message":"bad"}}`, model.KindBadRequest},
		{422, `{"detail":[{"msg":"field required"}]}`, model.KindBadRequest},
		{401, `{"error":{"type":"authentication_error","message":"invalid x-api-key"}}`, model.KindAuth},
		{403, `{"error":{"type":"permission_error"}}`, model.KindPermission},
		{404, `{"error":{"type":"not_found_error"}}`, model.KindNotFound},
		{408, ``, model.KindTimeout},
		{409, `{"error":{"type":"conflict_error"}}`, model.KindServer},
		{413, `{"error":{"type":"request_too_large"}}`, model.KindRequestTooLarge},
		{429, `{"error":{"type":"rate_limit_error"}}`, model.KindRateLimited},
		{429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, model.KindQuota},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"spend","details":{"error_code":"enforced_spend_limit_reached"}}}`, model.KindQuota},
		{402, `{"error":{"type":"billing_error"}}`, model.KindQuota},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`, model.KindQuota},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits."}}`, model.KindQuota},
		{400, `{"error":{"message":"This model's maximum context length is 128000 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`, model.KindContextTooLong},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 201000 tokens > 200000 maximum"}}`, model.KindContextTooLong},
		{500, `{"error":{"type":"api_error"}}`, model.KindServer},
		{502, `<html><body>Bad Gateway</body></html>`, model.KindServer},
		{503, `{"error":{"message":"engine overloaded","type":"overloaded"}}`, model.KindOverloaded},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, model.KindOverloaded},
		{418, ``, model.KindBadRequest},
		// Inside a stream (status 0): by type alone.
		{0, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, model.KindOverloaded},
		{0, `{"error":{"type":"server_error","message":"The server had an error"}}`, model.KindServer},
		{0, `{"error":{"type":"rate_limit_error"}}`, model.KindRateLimited},
		{0, `{"error":{"type":"invalid_request_error","message":"bad"}}`, model.KindBadRequest},
		{0, `{"error":{"type":"something_new"}}`, model.KindServer},
		{0, `{"error":{"type":"insufficient_quota"}}`, model.KindQuota},
	}
	for _, c := range cases {
		e := ErrorFromBody("op", c.status, http.Header{}, []byte(c.body))
		if e.Kind != c.want {
			t.Errorf("status %d body %s: kind %q, want %q (%v)", c.status, c.body, e.Kind, c.want, e)
		}
	}
}

func TestErrorFromBodyFields(t *testing.T) {
	h := http.Header{}
	h.Set("x-request-id", "req_openai")
	h.Set("retry-after", "3")
	h.Set("x-should-retry", "false")
	e := ErrorFromBody("openai: chat", 429, h, []byte(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`))
	if e.RequestID != "req_openai" || e.RetryAfter != 3*time.Second || e.ShouldRetry == nil || *e.ShouldRetry || e.Retryable() {
		t.Fatalf("headers not read: %+v", e)
	}
	if e.Message != "Rate limit reached" || e.Type != "requests/rate_limit_exceeded" || e.Status != 429 {
		t.Fatalf("body not read: %+v", e)
	}

	// Anthropic: the request id may only be in the body.
	e = ErrorFromBody("anthropic", 529, http.Header{}, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_ant"}`))
	if e.RequestID != "req_ant" || e.Type != "overloaded_error" || e.Message != "Overloaded" {
		t.Fatalf("anthropic body: %+v", e)
	}
	h = http.Header{}
	h.Set("request-id", "req_hdr")
	if e := ErrorFromBody("a", 500, h, nil); e.RequestID != "req_hdr" {
		t.Fatalf("request-id header not read: %+v", e)
	}

	// Compatible servers: {"error":"text"}.
	e = ErrorFromBody("ollama", 404, http.Header{}, []byte(`{"error":"model 'x' not found"}`))
	if e.Kind != model.KindNotFound || e.Message != "model 'x' not found" {
		t.Fatalf("string error: %+v", e)
	}

	// An HTML page: quoted, raw kept but capped.
	page := "<html><head><title>502 Bad Gateway</title></head>" + strings.Repeat("x", 20000)
	e = ErrorFromBody("openai", 502, http.Header{}, []byte(page))
	if !strings.Contains(e.Message, "502 Bad Gateway") || !strings.Contains(e.Message, "not a JSON error") {
		t.Fatalf("html message: %q", e.Message)
	}
	if len(e.Raw) != RawKeep || len(e.Message) > 400 {
		t.Fatalf("raw %d bytes, message %d bytes", len(e.Raw), len(e.Message))
	}
	if !strings.Contains(e.Error(), "HTTP 502") {
		t.Fatalf("Error() lacks the status: %s", e.Error())
	}
}

func TestStreamError(t *testing.T) {
	e := StreamError("anthropic: stream", http.Header{}, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	if e.Kind != model.KindOverloaded || e.Status != 0 || !e.Retryable() {
		t.Fatalf("%+v", e)
	}
	e = StreamError("x", http.Header{}, []byte(`{"error":{}}`))
	if e.Kind != model.KindServer || e.Message == "" {
		t.Fatalf("empty error object: %+v", e)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		ms, s string
		want  time.Duration
	}{
		{"", "2", 2 * time.Second},
		{"", "1.5", 1500 * time.Millisecond},
		{"1500", "30", 1500 * time.Millisecond},
		{"abc", "30", 30 * time.Second},
		{"-1", "", 0},
		{"", "-5", 0},
		{"", "0", 0},
		{"", "NaN", 0},
		{"", "inf", 0},
		{"", "+Inf", 0},
		{"", "abc", 0},
		{"", "", 0},
		{"NaN", "", 0},
		{"", now.Add(10 * time.Second).Format(http.TimeFormat), 10 * time.Second},
		{"", now.Add(-10 * time.Second).Format(http.TimeFormat), 0},
		{"", "1e300", maxHint},
	}
	for _, c := range cases {
		h := http.Header{}
		if c.ms != "" {
			h.Set("retry-after-ms", c.ms)
		}
		if c.s != "" {
			h.Set("retry-after", c.s)
		}
		if got := RetryAfter(h, now); got != c.want {
			t.Errorf("ms=%q s=%q: %v, want %v", c.ms, c.s, got, c.want)
		}
	}
}

func TestShouldRetry(t *testing.T) {
	for v, want := range map[string]string{"true": "true", "FALSE": "false", "yes": "nil", "": "nil"} {
		h := http.Header{}
		if v != "" {
			h.Set("x-should-retry", v)
		}
		got := "nil"
		if b := ShouldRetry(h); b != nil {
			got = map[bool]string{true: "true", false: "false"}[*b]
		}
		if got != want {
			t.Errorf("%q: %s, want %s", v, got, want)
		}
	}
}

func TestNewRequestReplayable(t *testing.T) {
	body := []byte(`{"a":1}`)
	ctx := context.Background()
	req, err := NewRequest(ctx, "http://example.invalid/x", body, http.Header{"Authorization": {"Bearer k"}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		rc, err := req.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		if string(b) != string(body) {
			t.Fatalf("GetBody gave %q", b)
		}
	}
	if req.Header.Get("Authorization") != "Bearer k" || req.Header.Get("Content-Type") != "application/json" || req.Header.Get(AttemptHeader) != "0" {
		t.Fatalf("headers: %v", req.Header)
	}
}

func TestSendMapsFailures(t *testing.T) {
	t.Run("status", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("x-request-id", "r1")
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
		}))
		defer srv.Close()
		req, _ := NewRequest(context.Background(), srv.URL, []byte("{}"), nil)
		_, err := Send(srv.Client(), req, "op")
		if model.KindOf(err) != model.KindAuth || model.IsRetryable(err) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		req, _ := NewRequest(context.Background(), "http://"+addr, []byte("{}"), nil)
		_, err = Send(nil, req, "op")
		if model.KindOf(err) != model.KindNetwork || !model.IsRetryable(err) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("reset before headers", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // RST instead of FIN
			}
			c.Close()
		}))
		defer srv.Close()
		req, _ := NewRequest(context.Background(), srv.URL, []byte("{}"), nil)
		_, err := Send(srv.Client(), req, "op")
		if model.KindOf(err) != model.KindNetwork {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("caller cancel", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // the server notices a gone client only after the body
			<-r.Context().Done()
		}))
		defer srv.Close()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := NewRequest(ctx, srv.URL, []byte("{}"), nil)
		go func() { time.Sleep(10 * time.Millisecond); cancel() }()
		_, err := Send(srv.Client(), req, "op")
		var me *model.Error
		if !errors.Is(err, context.Canceled) || errors.As(err, &me) {
			t.Fatalf("got %v, want a wrapped context.Canceled that is no *model.Error", err)
		}
	})
	t.Run("caller deadline", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // the server notices a gone client only after the body
			<-r.Context().Done()
		}))
		defer srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		req, _ := NewRequest(ctx, srv.URL, []byte("{}"), nil)
		_, err := Send(srv.Client(), req, "op")
		if model.KindOf(err) != model.KindTimeout || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestReadBody(t *testing.T) {
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(strings.Repeat("a", 100))), ContentLength: -1}
	if _, err := ReadBody(context.Background(), "op", resp, 50); model.KindOf(err) != model.KindAnswerTooLarge {
		t.Fatalf("over cap: %v", err)
	}
	resp = &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"a":1}`)), ContentLength: 7}
	b, err := ReadBody(context.Background(), "op", resp, 50)
	if err != nil || string(b) != `{"a":1}` {
		t.Fatalf("%q %v", b, err)
	}
}

func TestInvalidResponse(t *testing.T) {
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}}}
	err := CheckJSON("op", resp, []byte("<!DOCTYPE html><title>Proxy error</title>"))
	if model.KindOf(err) != model.KindInvalidResponse || !strings.Contains(err.Error(), "Proxy error") || !strings.Contains(err.Error(), "text/html") {
		t.Fatalf("got %v", err)
	}
	if err := CheckJSON("op", resp, []byte(` {"ok":true}`)); err != nil {
		t.Fatalf("JSON refused: %v", err)
	}
	if s := Snippet([]byte(strings.Repeat("é", 200))); strings.Contains(s, `\x`) {
		t.Fatalf("snippet cut a rune: %s", s)
	}
}

// TestWatchIdle: headers and one ping, then silence. The read fails with a
// timeout exactly the idle time after the last byte (ADVERSARIAL 19).
func TestWatchIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, stop := pipenet.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			time.Sleep(30 * time.Second)
			io.WriteString(w, "event: ping\ndata: {}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}))
		defer stop()
		start := time.Now()
		ctx, w := NewWatch(context.Background(), "op", 90*time.Second, 0)
		defer w.Stop()
		req, _ := NewRequest(ctx, "http://pipenet/", []byte("{}"), nil)
		resp, err := Send(client, req, "op")
		if err != nil {
			t.Fatal(err)
		}
		body := w.Body(resp.Body)
		defer body.Close()
		_, err = io.ReadAll(body)
		if model.KindOf(err) != model.KindTimeout || !strings.Contains(err.Error(), "sent nothing for 1m30s") {
			t.Fatalf("got %v", err)
		}
		if got := time.Since(start); got != 120*time.Second {
			t.Fatalf("failed after %v, want 2m0s (30 s to the ping + 90 s idle)", got)
		}
	})
}

// TestWatchNoHeaders: the server accepts the request and never answers
// (ADVERSARIAL 11).
func TestWatchNoHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, stop := pipenet.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // the server notices a gone client only after the body
			<-r.Context().Done()
		}))
		defer stop()
		start := time.Now()
		ctx, w := NewWatch(context.Background(), "op", 5*time.Second, 0)
		defer w.Stop()
		req, _ := NewRequest(ctx, "http://pipenet/", []byte("{}"), nil)
		_, err := Send(client, req, "op")
		if model.KindOf(err) != model.KindTimeout || !model.IsRetryable(err) {
			t.Fatalf("got %v", err)
		}
		if got := time.Since(start); got != 5*time.Second {
			t.Fatalf("failed after %v, want 5s", got)
		}
	})
}

// TestWatchTotal: pings keep the idle timer happy; the total deadline ends
// the call anyway (ADVERSARIAL 20).
func TestWatchTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, stop := pipenet.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			for r.Context().Err() == nil {
				io.WriteString(w, ": ping\n\n")
				w.(http.Flusher).Flush()
				time.Sleep(100 * time.Millisecond)
			}
		}))
		defer stop()
		start := time.Now()
		ctx, w := NewWatch(context.Background(), "op", time.Second, 10*time.Minute)
		defer w.Stop()
		req, _ := NewRequest(ctx, "http://pipenet/", []byte("{}"), nil)
		resp, err := Send(client, req, "op")
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, w.Body(resp.Body))
		if model.KindOf(err) != model.KindTimeout || !strings.Contains(err.Error(), "did not finish within 10m0s") {
			t.Fatalf("got %v", err)
		}
		if got := time.Since(start); got < 10*time.Minute || got > 10*time.Minute+time.Second {
			t.Fatalf("failed after %v, want 10m", got)
		}
	})
}

// TestWatchCallerCancel: cancelling the caller's context mid-body is a
// cancellation, not a timeout.
func TestWatchCallerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, stop := pipenet.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}))
		defer stop()
		parent, cancel := context.WithCancel(context.Background())
		ctx, w := NewWatch(parent, "op", time.Minute, 0)
		defer w.Stop()
		req, _ := NewRequest(ctx, "http://pipenet/", []byte("{}"), nil)
		resp, err := Send(client, req, "op")
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(time.Second, cancel)
		_, err = io.Copy(io.Discard, w.Body(resp.Body))
		var me *model.Error
		if !errors.Is(err, context.Canceled) || errors.As(err, &me) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestLimits(t *testing.T) {
	for _, c := range []struct{ idle, timeout, wantIdle, wantTimeout time.Duration }{
		{0, 0, DefaultIdleTimeout, 7 * time.Minute},
		{-1, -1, 0, 0},
		{time.Second, 2 * time.Second, time.Second, 2 * time.Second},
	} {
		idle, timeout := Limits(c.idle, c.timeout, 7*time.Minute)
		if idle != c.wantIdle || timeout != c.wantTimeout {
			t.Errorf("Limits(%v, %v) = %v, %v; want %v, %v", c.idle, c.timeout, idle, timeout, c.wantIdle, c.wantTimeout)
		}
	}
}

// OpenRouter's error codes are HTTP statuses, sent as JSON numbers, also
// inside a 200 stream: they classify like the status they name.
func TestStreamErrorNumericCodeIsAStatus(t *testing.T) {
	for _, c := range []struct {
		body      string
		kind      model.Kind
		retryable bool
	}{
		{`{"error":{"code":400,"message":"Token limit reached"}}`, model.KindBadRequest, false},
		{`{"error":{"code":429,"message":"Rate limit exceeded: free-models-per-min."}}`, model.KindRateLimited, true},
		{`{"error":{"code":401,"message":"No auth credentials found"}}`, model.KindAuth, false},
		{`{"error":{"code":402,"message":"Insufficient credits"}}`, model.KindQuota, false},
		{`{"error":{"code":403,"message":"Input flagged by moderation"}}`, model.KindPermission, false},
		{`{"error":{"code":408,"message":"Request timed out"}}`, model.KindTimeout, true},
		{`{"error":{"code":502,"message":"Provider returned error"}}`, model.KindServer, true},
		{`{"error":{"code":400,"message":"This endpoint's maximum context length is 8192 tokens."}}`, model.KindContextTooLong, false},
		{`{"code":429,"message":"slow down"}`, model.KindRateLimited, true},
		// Not statuses: a number out of range, and a code that is a string.
		{`{"error":{"code":7,"message":"odd"}}`, model.KindServer, true},
		{`{"error":{"code":"400","message":"a string"}}`, model.KindServer, true},
		{`{"error":{"code":"server_error","message":"Provider disconnected unexpectedly"}}`, model.KindServer, true},
	} {
		e := StreamError("openai: stream", http.Header{}, []byte(c.body))
		if e.Kind != c.kind || e.Retryable() != c.retryable || e.Status != 0 {
			t.Errorf("%s: kind %s retryable %v status %d, want %s %v 0", c.body, e.Kind, e.Retryable(), e.Status, c.kind, c.retryable)
		}
	}
	// An HTTP status wins over the code the body names.
	if e := ErrorFromBody("x", 503, http.Header{}, []byte(`{"error":{"code":400,"message":"m"}}`)); e.Kind != model.KindServer {
		t.Errorf("503 with code 400: %s", e.Kind)
	}
}
