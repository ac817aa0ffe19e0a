package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
	"github.com/loomkit/loom/tool/tooltest"
)

// network stands in for the network in tests: it connects to loopback
// addresses (through the fetcher's own Control check) and refuses every
// other address, recording what the fetcher tried. No test touches
// anything but loopback.
type network struct {
	mu    sync.Mutex
	tried []string
}

func (n *network) install(f *Fetcher) {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: f.control}
	f.connect = func(ctx context.Context, nw, address string) (net.Conn, error) {
		n.mu.Lock()
		n.tried = append(n.tried, address)
		n.mu.Unlock()
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			return nil, fmt.Errorf("test network: not connecting to %s (tests reach loopback only)", address)
		}
		return d.DialContext(ctx, nw, address)
	}
}

func (n *network) attempts() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.tried...)
}

// resolver answers from a table; unknown names fail without a lookup.
func resolver(table map[string][]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		ips, ok := table[host]
		if !ok {
			return nil, fmt.Errorf("test resolver: no such host %s", host)
		}
		var out []netip.Addr
		for _, s := range ips {
			out = append(out, netip.MustParseAddr(s))
		}
		return out, nil
	}
}

func testFetcher(t *testing.T, cfg Config) (*Fetcher, *network) {
	t.Helper()
	if cfg.Resolve == nil {
		cfg.Resolve = resolver(nil)
	}
	f := NewFetcher(&cfg)
	n := &network{}
	n.install(f)
	return f, n
}

// serve starts a loopback server and returns its URL and address.
func serve(t *testing.T, h http.HandlerFunc) (string, netip.AddrPort) {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL, netip.MustParseAddrPort(s.Listener.Addr().String())
}

func wantBlocked(t *testing.T, err error, contains string) {
	t.Helper()
	var b *BlockedError
	if !errors.As(err, &b) {
		t.Fatalf("error %v (%T), want a *BlockedError", err, err)
	}
	if !strings.Contains(err.Error(), contains) {
		t.Errorf("error %q does not say %q", err, contains)
	}
}

func TestWhyBlocked(t *testing.T) {
	blocked := []string{
		"169.254.169.254", "127.0.0.1", "127.255.255.254", "0.0.0.0", "0.1.2.3", "10.0.0.1", "172.16.0.1",
		"172.31.255.255", "192.168.1.1", "100.64.0.1", "100.127.255.255", "224.0.0.1", "239.255.255.250",
		"255.255.255.255", "240.0.0.1", "192.0.2.1", "198.51.100.7", "203.0.113.9", "198.18.0.1",
		"::1", "::", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1",
		"fd00::1", "fc00::1", "fe80::1", "fe80::1%eth0", "fec0::1", "ff02::1", "2001:db8::1",
		"64:ff9b::7f00:1", "64:ff9b::a00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "2002:7f00:1::1",
		"2002:5db8:d822::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "100::1",
	}
	for _, s := range blocked {
		if why := whyBlocked(netip.MustParseAddr(s)); why == "" {
			t.Errorf("%s is not blocked", s)
		}
	}
	public := []string{"93.184.216.34", "8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "2a00:1450::1", "64:ff9b::5db8:d822", "::ffff:93.184.216.34"}
	for _, s := range public {
		why := whyBlocked(netip.MustParseAddr(s))
		if s == "::ffff:93.184.216.34" {
			if why == "" {
				t.Errorf("%s: IPv4-mapped addresses are refused even when public (dial the IPv4 address)", s)
			}
			continue
		}
		if why != "" {
			t.Errorf("%s is blocked: %s", s, why)
		}
	}
	if why := whyBlocked(netip.MustParseAddr("169.254.169.254")); !strings.Contains(why, "metadata") {
		t.Errorf("169.254.169.254: %q does not mention cloud metadata", why)
	}
}

func TestNumericIPv4(t *testing.T) {
	for host, want := range map[string]string{
		"2130706433": "127.0.0.1", "0x7f.1": "127.0.0.1", "0177.0.0.1": "127.0.0.1", "0x7f000001": "127.0.0.1",
		"127.1": "127.0.0.1", "127.0.1": "127.0.0.1", "1.2.3.4": "1.2.3.4", "0": "0.0.0.0", "0x0": "0.0.0.0",
		"017700000001": "127.0.0.1", "169.254.43518": "169.254.169.254", "127.0.0.1.": "127.0.0.1",
	} {
		a, ok, err := numericIPv4(host)
		if !ok || err != nil || a.String() != want {
			t.Errorf("numericIPv4(%q) = %v, %v, %v; want %s", host, a, ok, err, want)
		}
	}
	for _, host := range []string{"256.1.1.1", "1.2.3.256", "4294967296", "1.16777216", "99999999999999999999999"} {
		if _, ok, err := numericIPv4(host); !ok || err == nil {
			t.Errorf("numericIPv4(%q): ok %v, err %v; want a numeric host that is refused", host, ok, err)
		}
	}
	for _, host := range []string{"example.com", "1.2.3.4.5", "1e3", "0xg", "a.1", "", "12.example"} {
		if _, ok, _ := numericIPv4(host); ok {
			t.Errorf("numericIPv4(%q) says numeric", host)
		}
	}
}

// ADVERSARIAL 62, 63: every private form is refused, whatever its spelling,
// and nothing is dialled.
func TestRefusesPrivateDestinations(t *testing.T) {
	f, n := testFetcher(t, Config{Resolve: resolver(map[string][]string{
		"metadata.google.internal": {"169.254.169.254"},
		"evil.example":             {"10.0.0.5"},
		"loop.example":             {"127.0.0.1", "::1"},
		"mapped.example":           {"::ffff:127.0.0.1"},
		"nat64.example":            {"64:ff9b::7f00:1"},
		"ula.example":              {"fd12:3456::1"},
		"cgnat.example":            {"100.64.0.1"},
		"zero.example":             {"0.0.0.0"},
	})})
	urls := []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://169.254.169.254/computeMetadata/v1/",
		"http://metadata.google.internal/computeMetadata/v1/",
		"http://127.0.0.1:8080/",
		"http://127.0.0.1/",
		"http://[::1]/",
		"http://0.0.0.0/",
		"http://[::]/",
		"http://[::ffff:127.0.0.1]/",
		"http://[::ffff:7f00:1]/",
		"http://[::127.0.0.1]/",
		"http://2130706433/",
		"http://0x7f.1/",
		"http://0177.0.0.1/",
		"http://0x7f000001/",
		"http://127.1/",
		"http://localhost/",
		"http://localhost./",
		"http://LOCALHOST:80/",
		"http://app.localhost/",
		"http://[fd00::1]/",
		"http://100.64.0.1/",
		"http://[64:ff9b::7f00:1]/",
		"http://[64:ff9b::a9fe:a9fe]/",
		"http://[fe80::1%25eth0]/",
		"http://[2002:7f00:1::1]/",
		"http://10.0.0.1/",
		"http://172.16.0.1/",
		"http://192.168.0.1/",
		"http://224.0.0.1/",
		"http://255.255.255.255/",
		"https://evil.example/",
		"http://loop.example/",
		"http://mapped.example/",
		"http://nat64.example/",
		"http://ula.example/",
		"http://cgnat.example/",
		"http://zero.example/",
	}
	for _, u := range urls {
		_, err := f.Fetch(t.Context(), u)
		wantBlocked(t, err, "not a public address")
		if !strings.Contains(err.Error(), "refused to fetch") {
			t.Errorf("%s: %v", u, err)
		}
	}
	if tried := n.attempts(); len(tried) != 0 {
		t.Errorf("connections were attempted: %v", tried)
	}
}

func TestRefusesBadURLs(t *testing.T) {
	f, n := testFetcher(t, Config{Resolve: resolver(map[string][]string{"example.com": {"93.184.216.34"}})})
	for u, says := range map[string]string{
		"file:///etc/passwd":                 "only http and https",
		"gopher://example.com/":              "only http and https",
		"ftp://example.com/":                 "only http and https",
		"example.com/page":                   "no scheme",
		"http:///path":                       "no host",
		"http://user:pass@example.com/":      "user name or password",
		"http://user@example.com/":           "user name or password",
		"http://example.com:22/":             "port 22",
		"http://example.com:6379/":           "port 6379",
		"http://93.184.216.34:22/":           "port 22",
		"https://93.184.216.34:6379/":        "port 6379",
		"http://example.com:99999/":          "not a port number",
		"http://256.1.1.1/":                  "above 255",
		"http://exa mple.com/":               "not a valid URL",
		"http://[::1":                        "not a valid URL",
		"javascript:alert(1)":                "only http and https",
		"http://example.com:0/":              "not a port number",
		"http://%31%32%37.0.0.1/":            "not a valid URL",
		"http://4294967296/":                 "does not fit",
		"http://example.com:8080/":           "port 8080",
		"http://[64:ff9b::5db8:d822]:22/":    "port 22",
		"https://user:secret@127.0.0.1/x?a=": "user name or password",
	} {
		_, err := f.Fetch(t.Context(), u)
		wantBlocked(t, err, says)
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "pass@example") {
			t.Errorf("%s: the error shows the password: %v", u, err)
		}
	}
	if tried := n.attempts(); len(tried) != 0 {
		t.Errorf("connections were attempted: %v", tried)
	}
}

// The check made when the socket connects, whatever resolved the address.
func TestControl(t *testing.T) {
	f := NewFetcher(&Config{Allow: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:9999")}})
	for _, c := range []struct {
		network, addr string
		ok            bool
	}{
		{"tcp4", "93.184.216.34:443", true},
		{"tcp6", "[2606:4700:4700::1111]:80", true},
		{"tcp4", "127.0.0.1:80", false},
		{"tcp4", "169.254.169.254:80", false},
		{"tcp6", "[::1]:443", false},
		{"tcp6", "[::ffff:127.0.0.1]:443", false},
		{"tcp4", "93.184.216.34:22", false},
		{"udp4", "93.184.216.34:443", false},
		{"tcp4", "127.0.0.1:9999", true},
		{"tcp4", "127.0.0.1:9998", false},
		{"tcp4", "not-an-address", false},
	} {
		err := f.control(c.network, c.addr, nil)
		if (err == nil) != c.ok {
			t.Errorf("control(%s, %s) = %v, want ok %v", c.network, c.addr, err, c.ok)
		}
	}
}

// ADVERSARIAL 64: a name that resolves to a public address first and to
// 127.0.0.1 next never reaches 127.0.0.1.
func TestDNSRebinding(t *testing.T) {
	var hits atomic.Int64
	_, local := serve(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "internal admin page")
	})
	var lookups atomic.Int64
	rebind := func(_ context.Context, host string) ([]netip.Addr, error) {
		if lookups.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
		}
		return []netip.Addr{local.Addr()}, nil
	}
	f, n := testFetcher(t, Config{Resolve: rebind, Ports: []int{80, int(local.Port())}})
	u := fmt.Sprintf("http://rebind.example:%d/admin", local.Port())
	// First lookup: public. The test network refuses to connect there.
	_, err := f.Fetch(t.Context(), u)
	if err == nil || !strings.Contains(err.Error(), "test network: not connecting to 93.184.216.34") {
		t.Fatalf("first fetch: %v; want a connection attempt to the public address only", err)
	}
	// Second lookup: 127.0.0.1. Refused at dial.
	_, err = f.Fetch(t.Context(), u)
	wantBlocked(t, err, "loopback")
	if !strings.Contains(err.Error(), "rebind.example") {
		t.Errorf("error %q does not name the URL", err)
	}
	// One answer with both: only the public address is tried.
	f2, n2 := testFetcher(t, Config{Resolve: resolver(map[string][]string{"both.example": {local.Addr().String(), "93.184.216.34"}}), Ports: []int{int(local.Port())}})
	_, err = f2.Fetch(t.Context(), fmt.Sprintf("http://both.example:%d/", local.Port()))
	if err == nil {
		t.Error("fetch of a name resolving to loopback and a public address succeeded")
	}
	for _, a := range append(n.attempts(), n2.attempts()...) {
		if strings.HasPrefix(a, "127.") {
			t.Errorf("a connection to %s was attempted", a)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the loopback server was reached %d times", hits.Load())
	}
	if lookups.Load() != 2 {
		t.Errorf("%d lookups for two fetches: each connection must use the addresses it checked", lookups.Load())
	}
}

// ADVERSARIAL 65: redirects are checked like the first URL, and at most 5
// are followed.
func TestRedirects(t *testing.T) {
	var adminHits atomic.Int64
	adminURL, admin := serve(t, func(w http.ResponseWriter, r *http.Request) { adminHits.Add(1) })
	var hops atomic.Int64
	var mu sync.Mutex
	var lastHeaders http.Header
	srvURL, srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		hops.Add(1)
		mu.Lock()
		lastHeaders = r.Header.Clone()
		mu.Unlock()
		q := r.URL.Query()
		switch {
		case q.Get("to") != "":
			http.Redirect(w, r, q.Get("to"), http.StatusFound)
		case q.Get("n") != "":
			var n int
			fmt.Sscan(q.Get("n"), &n)
			if n == 0 {
				fmt.Fprint(w, "arrived")
				return
			}
			http.Redirect(w, r, fmt.Sprintf("/?n=%d", n-1), http.StatusMovedPermanently)
		default:
			fmt.Fprint(w, "plain page")
		}
	})
	f, n := testFetcher(t, Config{
		Allow:   []netip.AddrPort{srv},
		Ports:   []int{80, 443, int(admin.Port())},
		Resolve: resolver(map[string][]string{"internal.example": {"127.0.0.1"}}),
	})
	fetch := func(u string) (*Page, error) {
		hops.Store(0)
		return f.Fetch(t.Context(), u)
	}
	for to, says := range map[string]string{
		adminURL + "/admin":                      "loopback",
		"http://127.0.0.1/admin":                 "loopback",
		"http://169.254.169.254/latest/":         "metadata",
		"file:///etc/passwd":                     "only http and https",
		"http://user:pass@" + srv.String() + "/": "user name or password",
		"http://internal.example/":               "loopback",
		"http://[::ffff:127.0.0.1]/":             "not a public address",
		"http://2130706433/":                     "not a public address",
		"http://93.184.216.34:22/":               "port 22",
		"gopher://93.184.216.34/":                "only http and https",
	} {
		_, err := fetch(srvURL + "/?to=" + url.QueryEscape(to))
		wantBlocked(t, err, says)
		if hops.Load() != 1 {
			t.Errorf("redirect to %s: %d requests to the server, want 1", to, hops.Load())
		}
	}
	if adminHits.Load() != 0 {
		t.Errorf("the admin server was reached %d times through redirects", adminHits.Load())
	}
	p, err := fetch(srvURL + "/?n=5")
	if err != nil || string(p.Body) != "arrived" || hops.Load() != 6 {
		t.Errorf("5 redirects: page %v, err %v, %d requests; want arrival after 6 requests", p, err, hops.Load())
	}
	_, err = fetch(srvURL + "/?n=11")
	wantBlocked(t, err, "stopped after 5 redirects")
	if hops.Load() != 6 {
		t.Errorf("11 redirects: %d requests, want 6 (the first and 5 redirects)", hops.Load())
	}
	// ADVERSARIAL 68: no credentials headers follow a redirect.
	_, err = fetch(srvURL + "/?to=" + url.QueryEscape(srvURL+"/plain"))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for _, h := range []string{"Authorization", "Cookie", "Proxy-Authorization"} {
		if lastHeaders.Get(h) != "" {
			t.Errorf("the redirected request carried %s", h)
		}
	}
	mu.Unlock()
	for _, a := range n.attempts() {
		if a != srv.String() {
			t.Errorf("a connection to %s was attempted", a)
		}
	}
	none, _ := testFetcher(t, Config{Allow: []netip.AddrPort{srv}, MaxRedirects: -1})
	_, err = none.Fetch(t.Context(), srvURL+"/?n=1")
	wantBlocked(t, err, "stopped after 0 redirects")
}

// ADVERSARIAL 66: proxies from the environment are ignored, so the checks
// cannot be bypassed through one.
func TestProxyFromEnvironmentIgnored(t *testing.T) {
	var proxyHits atomic.Int64
	proxyURL, proxy := serve(t, func(w http.ResponseWriter, r *http.Request) {
		proxyHits.Add(1)
		fmt.Fprint(w, "proxied")
	})
	for _, v := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(v, proxyURL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	targetURL, target := serve(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "direct") })
	// The proxy's address is allowed, as a real proxy's public address
	// would be: a client using it would let the proxy resolve
	// internal.example to a private address.
	f, n := testFetcher(t, Config{
		Allow:   []netip.AddrPort{target, proxy},
		Resolve: resolver(map[string][]string{"internal.example": {"10.0.0.1"}, "public.example": {"93.184.216.34"}}),
	})
	p, err := f.Fetch(t.Context(), targetURL)
	if err != nil || string(p.Body) != "direct" {
		t.Fatalf("fetch with proxies in the environment: %v, %v; want the target reached directly", p, err)
	}
	_, err = f.Fetch(t.Context(), "http://internal.example/")
	wantBlocked(t, err, "private network")
	_, err = f.Fetch(t.Context(), "http://169.254.169.254/latest/meta-data/")
	wantBlocked(t, err, "metadata")
	_, err = f.Fetch(t.Context(), "http://public.example/")
	if err == nil || !strings.Contains(err.Error(), "test network: not connecting to 93.184.216.34:80") {
		t.Errorf("public.example: %v; want a direct connection attempt to its address", err)
	}
	if proxyHits.Load() != 0 {
		t.Errorf("the proxy was used %d times", proxyHits.Load())
	}
	for _, a := range n.attempts() {
		if a == proxy.String() {
			t.Errorf("a connection to the proxy was attempted")
		}
	}
}

// ADVERSARIAL 69: a huge body and a gzip bomb are cut at MaxBytes.
func TestSizeCaps(t *testing.T) {
	const max = 256 << 10
	chunk := bytes.Repeat([]byte("a"), 32<<10)
	var written atomic.Int64
	hugeURL, huge := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "5000000000") // 5 GB
		for written.Load() < 5e9 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestSpeed)
	zeros := make([]byte, 1<<20)
	for range 16 { // 16 MB of zeros in about 70 KB: 64 times the cap
		zw.Write(zeros)
	}
	zw.Close()
	bombURL, bombAddr := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(bomb.Bytes())
	})
	f, _ := testFetcher(t, Config{MaxBytes: max, Allow: []netip.AddrPort{huge, bombAddr}})
	p, err := f.Fetch(t.Context(), hugeURL)
	if err != nil || !p.Truncated || len(p.Body) != max {
		t.Fatalf("5 GB body: %v bytes, truncated %v, err %v; want %d bytes, truncated", lenBody(p), p != nil && p.Truncated, err, max)
	}
	if w := written.Load(); w > 32<<20 {
		t.Errorf("the server wrote %d bytes before the client stopped reading", w)
	}
	p, err = f.Fetch(t.Context(), bombURL)
	if err != nil || !p.Truncated || len(p.Body) != max {
		t.Fatalf("gzip bomb: %v bytes, err %v; want %d bytes, truncated", lenBody(p), err, max)
	}
}

func lenBody(p *Page) int {
	if p == nil {
		return -1
	}
	return len(p.Body)
}

// ADVERSARIAL 69: a server sending a byte at a time, or nothing at all,
// meets the total deadline.
func TestSlowServers(t *testing.T) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	dripURL, drip := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(200)
		for {
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			w.Write([]byte("x"))
			w.(http.Flusher).Flush()
		}
	})
	silentURL, silent := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	})
	f, _ := testFetcher(t, Config{Timeout: 300 * time.Millisecond, Allow: []netip.AddrPort{drip, silent}})
	for _, u := range []string{dripURL, silentURL} {
		_, err := f.Fetch(t.Context(), u)
		var te *TimeoutError
		if !errors.As(err, &te) || te.After != 300*time.Millisecond {
			t.Errorf("%s: error %v (%T), want a *TimeoutError after 300ms", u, err, err)
		}
	}
	// The caller's cancellation is not a timeout.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := f.Fetch(ctx, silentURL)
	var te *TimeoutError
	if err == nil || errors.As(err, &te) || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("cancelled fetch: %v", err)
	}
}

func TestToolFetchesText(t *testing.T) {
	var mu sync.Mutex
	var gotUA string
	srvURL, srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotUA = r.UserAgent()
		mu.Unlock()
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<html><head><title>Docs</title><script>alert("x")</script></head>
<body><h1>Hello</h1><p>See <a href="/next">the next page</a>.</p></body></html>`)
		case "/missing":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(404)
			fmt.Fprint(w, "<p>no such page</p>")
		case "/image":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("\x89PNG\r\n\x1a\nbinary"))
		case "/latin1":
			w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
			w.Write([]byte("caf\xe9 \x80"))
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"a":1}`)
		}
	})
	tl := New(&Config{Allow: []netip.AddrPort{srv}, Resolve: resolver(nil)})
	(&network{}).install(tl.Fetcher())
	run := func(path string) llm.ToolResult {
		args, _ := json.Marshal(Args{URL: srvURL + path})
		res, err := tl.Call(t.Context(), args)
		if err != nil {
			t.Fatalf("Call: Go error %v", err)
		}
		return res
	}
	res := run("/page")
	want := "URL: " + srvURL + "/page\nStatus: 200 OK\nContent-Type: text/html; charset=utf-8\n\n# Docs\n\n# Hello\n\nSee [the next page](" + srvURL + "/next).\n"
	if res.IsError || res.Content != want {
		t.Errorf("page:\n%q\nwant\n%q", res.Content, want)
	}
	mu.Lock()
	if gotUA != "loom-web-fetch/1" {
		t.Errorf("User-Agent %q", gotUA)
	}
	mu.Unlock()
	if res := run("/missing"); !res.IsError || !strings.Contains(res.Content, "404 Not Found") || !strings.Contains(res.Content, "no such page") {
		t.Errorf("404: %+v", res)
	}
	if res := run("/image"); !res.IsError || !strings.Contains(res.Content, "image/png") || !strings.Contains(res.Content, "text only") {
		t.Errorf("image: %+v", res)
	}
	if res := run("/latin1"); res.IsError || !strings.HasSuffix(res.Content, "café €") {
		t.Errorf("latin-1: %+v", res)
	}
	if res := run("/json"); res.IsError || !strings.HasSuffix(res.Content, `{"a":1}`) {
		t.Errorf("json: %+v", res)
	}
	args, _ := json.Marshal(Args{URL: "http://169.254.169.254/latest/meta-data/"})
	res, _ = tl.Call(t.Context(), args)
	if !res.IsError || !strings.Contains(res.Content, "refused to fetch http://169.254.169.254/latest/meta-data/") {
		t.Errorf("metadata: %+v", res)
	}
}

func TestApproval(t *testing.T) {
	args := json.RawMessage(`{"url":"https://example.com/"}`)
	if !tool.NeedsApproval(New(nil), args) || !New(nil).Spec().NeedsApproval {
		t.Error("web_fetch must need approval by default")
	}
	if tool.NeedsApproval(New(&Config{NoApproval: true}), args) {
		t.Error("NoApproval: web_fetch still needs approval")
	}
	if New(nil).Spec().Effect != llm.EffectReadOnly {
		t.Error("web_fetch only reads")
	}
}

func TestConformance(t *testing.T) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	srvURL, srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprint(w, "hello")
	})
	tl := New(&Config{Allow: []netip.AddrPort{srv}, Resolve: resolver(nil)})
	(&network{}).install(tl.Fetcher())
	(&tooltest.Suite{
		Tool: tl,
		Ran:  func() int { return int(tl.calls.Load()) },
		Cases: []tooltest.Case{
			{Name: "fetch", Args: fmt.Sprintf(`{"url":%q}`, srvURL+"/"), Contains: "hello"},
			{Name: "metadata", Args: `{"url":"http://169.254.169.254/"}`, WantError: true, Contains: "link-local"},
			{Name: "file", Args: `{"url":"file:///etc/passwd"}`, WantError: true, Contains: "only http and https"},
			{Name: "hangs", Args: fmt.Sprintf(`{"url":%q}`, srvURL+"/hang"), Blocks: true},
		},
	}).Run(t)
}

// Whatever the URL, the fetcher never tries to connect to an address the
// policy refuses, nor to a port it does not allow.
func FuzzFetchNeverDialsPrivate(f *testing.F) {
	for _, s := range []string{
		"http://127.0.0.1/", "http://2130706433/", "http://0x7f.1/", "http://[::ffff:127.0.0.1]/",
		"http://localhost./", "http://name.example/", "http://8.8.8.8/", "https://[2606:4700::1]:443/",
		"http://[64:ff9b::7f00:1]/", "http://0177.0.0.1:80/", "http://1.1.1.1:22/", "http://a@b/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		fetcher, n := testFetcher(t, Config{
			Timeout: time.Second,
			Resolve: func(context.Context, string) ([]netip.Addr, error) {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("::1")}, nil
			},
		})
		if _, err := fetcher.Fetch(context.Background(), u); err == nil {
			t.Fatalf("Fetch(%q) succeeded; nothing is reachable", u)
		}
		for _, a := range n.attempts() {
			ap, err := netip.ParseAddrPort(a)
			if err != nil || whyBlocked(ap.Addr()) != "" || (ap.Port() != 80 && ap.Port() != 443) {
				t.Fatalf("Fetch(%q) tried to connect to %s", u, a)
			}
		}
	})
}

func BenchmarkFetch(b *testing.B) {
	page := []byte("<html><body>" + strings.Repeat(`<p>Some <a href="/a">linked</a> text &amp; more.</p>`, 2000) + "</body></html>")
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write(page)
	}))
	defer s.Close()
	tl := New(&Config{Allow: []netip.AddrPort{netip.MustParseAddrPort(s.Listener.Addr().String())}, NoApproval: true})
	args, _ := json.Marshal(Args{URL: s.URL})
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if res, err := tl.Call(context.Background(), args); err != nil || res.IsError {
			b.Fatal(res.Content, err)
		}
	}
}
