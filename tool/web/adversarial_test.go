package web

import (
	"net/http"
	"net/netip"
	"sync"
	"testing"
)

// ADVERSARIAL 68, second half: credentials on a request never follow a
// redirect, not even to the same host, where net/http itself would copy
// them. Fetch sets none today; this holds the client to it should a caller
// or a later option add some.
func TestRedirectDropsCredentials(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]http.Header{}
	srvURL, srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Clone()
		mu.Unlock()
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/end", http.StatusFound)
		}
	})
	f, _ := testFetcher(t, Config{Allow: []netip.AddrPort{srv}})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srvURL+"/start", nil)
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string]string{"Authorization": "Bearer sk-secret", "Proxy-Authorization": "Basic c2VjcmV0", "Cookie": "session=secret"}
	for k, v := range creds {
		req.Header.Set(k, v)
	}
	req.Header.Set("X-Probe", "kept")
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	first, last := seen["/start"], seen["/end"]
	if first == nil || last == nil {
		t.Fatalf("requests seen: %v; want /start and then /end", seen)
	}
	for k, v := range creds {
		if first.Get(k) != v {
			t.Errorf("the first request lacks %s; the test did not set up what it checks", k)
		}
		if got := last.Get(k); got != "" {
			t.Errorf("the redirected request carried %s: %q", k, got)
		}
	}
	if last.Get("X-Probe") != "kept" {
		t.Error("the redirected request lost its other headers")
	}
}
