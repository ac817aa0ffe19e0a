package wire

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

// attemptContexts returns contexts carrying retry attempts 0..n-1, as
// model.Retry hands them to an adapter.
func attemptContexts(t *testing.T, n int) []context.Context {
	var ctxs []context.Context
	fail := model.Funcs{GenerateFunc: func(ctx context.Context, _ llm.Request) (llm.Response, error) {
		ctxs = append(ctxs, ctx)
		if len(ctxs) < n {
			return llm.Response{}, &model.Error{Kind: model.KindServer, Op: "test"}
		}
		return llm.Response{}, nil
	}}
	m := model.Retry(model.RetryPolicy{MaxRetries: n, BaseDelay: time.Nanosecond, MaxDelay: time.Nanosecond})(fail)
	if _, err := m.Generate(context.Background(), llm.Request{}); err != nil {
		t.Fatal(err)
	}
	for i, ctx := range ctxs {
		if model.RetryAttempt(ctx) != i {
			t.Fatalf("context %d carries attempt %d", i, model.RetryAttempt(ctx))
		}
	}
	return ctxs
}

func readAll(t *testing.T, rc io.ReadCloser) string {
	t.Helper()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	return string(b)
}

// TestEndpointMatchesNewRequest: an Endpoint builds what NewRequest builds.
func TestEndpointMatchesNewRequest(t *testing.T) {
	h := http.Header{"Authorization": {"Bearer k"}, "Accept": {"application/json"}, "X-Multi": {"a", "b"}, "Content-Type": {"text/plain"}}
	urls := []string{"http://127.0.0.1:8080/v1/chat/completions", "https://api.example.com:/v1/messages?beta=true", "http://user:pw@host/x"}
	for _, u := range urls {
		e := NewEndpoint(u, h)
		for _, ctx := range attemptContexts(t, 20) {
			for _, body := range [][]byte{[]byte(`{"model":"m"}`), {}} {
				want, err := NewRequest(ctx, u, body, h)
				if err != nil {
					t.Fatal(err)
				}
				got, err := e.Request(ctx, body)
				if err != nil {
					t.Fatal(err)
				}
				if got.Method != want.Method || got.URL.String() != want.URL.String() || got.Host != want.Host ||
					got.Proto != want.Proto || got.ContentLength != want.ContentLength || got.Context() != want.Context() {
					t.Fatalf("%s: got %s %s host %q %s len %d, want %s %s host %q %s len %d", u,
						got.Method, got.URL, got.Host, got.Proto, got.ContentLength, want.Method, want.URL, want.Host, want.Proto, want.ContentLength)
				}
				if !reflect.DeepEqual(got.Header, want.Header) {
					t.Fatalf("headers: got %v, want %v", got.Header, want.Header)
				}
				if g, w := readAll(t, got.Body), readAll(t, want.Body); g != w {
					t.Fatalf("body %q, want %q", g, w)
				}
				gb, _ := got.GetBody()
				wb, _ := want.GetBody()
				if g, w := readAll(t, gb), readAll(t, wb); g != w || g != string(body) {
					t.Fatalf("GetBody %q, want %q", g, w)
				}
			}
		}
	}
	_, werr := NewRequest(context.Background(), "http://bad host/", nil, h)
	_, gerr := NewEndpoint("http://bad host/", h).Request(context.Background(), nil)
	if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
		t.Fatalf("bad URL: got %v, want %v", gerr, werr)
	}
}

// Requests of one Endpoint do not see each other's header changes, nor
// change the Endpoint's.
func TestEndpointRequestsAreIndependent(t *testing.T) {
	e := NewEndpoint("http://127.0.0.1/x", http.Header{"Accept": {"application/json"}, "X-Multi": {"a", "b"}})
	a, _ := e.Request(context.Background(), []byte("{}"))
	a.Header.Set("Accept", "text/event-stream")
	a.Header.Add("X-Multi", "c")
	a.Header.Del("Content-Type")
	a.URL.Path = "/changed"
	b, _ := e.Request(context.Background(), []byte("{}"))
	if b.Header.Get("Accept") != "application/json" || len(b.Header["X-Multi"]) != 2 || b.Header.Get("Content-Type") != "application/json" || b.URL.Path != "/x" {
		t.Fatalf("a later request saw an earlier one's changes: %v %s", b.Header, b.URL)
	}
}
