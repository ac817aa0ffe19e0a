package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults of [Config].
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxBytes     = 5 << 20
	DefaultMaxRedirects = 5
)

// DefaultPorts are the ports web_fetch connects to unless configured
// otherwise: the web's, and not SSH's or Redis's.
var DefaultPorts = []int{80, 443}

// Config configures a [Fetcher] and the web_fetch tool. The zero value is
// the default: public addresses only, ports 80 and 443, 5 redirects, 5 MB,
// 30 seconds, and every call needs approval.
type Config struct {
	// Timeout bounds a whole fetch: resolving, connecting, every redirect
	// and reading the body (default [DefaultTimeout]).
	Timeout time.Duration
	// MaxBytes is how much of a body is read, after decompression
	// (default [DefaultMaxBytes]); the rest is not downloaded.
	MaxBytes int64
	// MaxRedirects is how many redirects are followed (default
	// [DefaultMaxRedirects]; negative: none).
	MaxRedirects int
	// Ports are the ports that may be connected to (default
	// [DefaultPorts]).
	Ports []int
	// Allow lists addresses reached despite the address policy, each an
	// exact IP and port: a local documentation server, or a test's
	// httptest server. Nothing else private is ever reached.
	Allow []netip.AddrPort
	// Resolve looks host names up (default: the system resolver). Every
	// address it returns is checked, and only checked addresses are
	// dialled, so a name that resolves differently a second time (DNS
	// rebinding) cannot reach a private address.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// UserAgent is sent with each request (default "loom-web-fetch/1").
	UserAgent string
	// NoApproval makes web_fetch calls run without approval.
	NoApproval bool
	// MaxResult is the size of the tool's result in bytes, cut to head and
	// tail beyond it (default tool.DefaultMaxResult).
	MaxResult int
}

// BlockedError is a destination web_fetch refuses: a scheme other than
// http and https, credentials in the URL, a port not allowed, an address
// that is not public, too many redirects.
type BlockedError struct {
	URL    string // the URL refused, when known
	Addr   string // the address refused (ip:port), when it came to that
	Reason string
}

func (e *BlockedError) Error() string {
	var b strings.Builder
	b.WriteString("refused to fetch")
	if e.URL != "" {
		fmt.Fprintf(&b, " %s", e.URL)
	}
	if e.Addr != "" {
		fmt.Fprintf(&b, " (address %s)", e.Addr)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// TimeoutError is a fetch stopped by Config.Timeout: a slow server, a
// body sent a byte at a time.
type TimeoutError struct {
	After time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("web_fetch gave up after %v: the server is too slow or sends without end", e.After)
}

// Fetcher fetches public web pages over a client that cannot reach
// private networks (see the package doc). It is safe for concurrent use.
type Fetcher struct {
	cfg    Config
	client *http.Client
	// connect opens the connection to a checked address; tests replace it
	// to see what would be dialled without touching the network.
	connect func(ctx context.Context, network, address string) (net.Conn, error)
}

// NewFetcher returns a Fetcher configured by cfg (nil for the defaults).
func NewFetcher(cfg *Config) *Fetcher {
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = DefaultMaxRedirects
	}
	if c.Ports == nil {
		c.Ports = DefaultPorts
	}
	if c.Resolve == nil {
		c.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if c.UserAgent == "" {
		c.UserAgent = "loom-web-fetch/1"
	}
	f := &Fetcher{cfg: c}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: f.control}
	f.connect = dialer.DialContext
	transport := &http.Transport{
		Proxy:                  nil, // never a proxy from the environment: it would resolve for us
		DialContext:            f.dial,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		IdleConnTimeout:        30 * time.Second,
		MaxIdleConns:           16,
	}
	f.client = &http.Client{Transport: transport, CheckRedirect: f.checkRedirect}
	return f
}

// checkURL refuses URLs web_fetch never fetches, before any connection.
func (f *Fetcher) checkURL(u *url.URL) error {
	refuse := func(reason string) error { return &BlockedError{URL: redact(u), Reason: reason} }
	switch u.Scheme {
	case "http", "https":
	case "":
		return refuse("the URL has no scheme; give a full http:// or https:// URL")
	default:
		return refuse(fmt.Sprintf("only http and https URLs are fetched, not %s", u.Scheme))
	}
	if u.User != nil {
		return refuse("the URL carries a user name or password (user:pass@); credentials are never sent, remove them")
	}
	host := u.Hostname()
	if host == "" {
		return refuse("the URL has no host")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return refuse(fmt.Sprintf("the port %q is not a port number", port))
	}
	lower := strings.TrimSuffix(strings.ToLower(host), ".")
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") || lower == "localhost.localdomain" {
		if !f.allowedHost(host, p) {
			return refuse("localhost is this machine, not a public address")
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if why := whyBlocked(a); why != "" && !f.allowed(netip.AddrPortFrom(a, uint16(p))) {
			return refuse(fmt.Sprintf("%s is %s, not a public address", a, why))
		}
	} else if a, ok, err := numericIPv4(host); ok {
		if err != nil {
			return refuse(err.Error())
		}
		if why := whyBlocked(a); why != "" && !f.allowed(netip.AddrPortFrom(a, uint16(p))) {
			return refuse(fmt.Sprintf("%s is %s written as %s, not a public address", a, why, host))
		}
	}
	if !slices.Contains(f.cfg.Ports, p) && !f.allowedHost(host, p) {
		return refuse(fmt.Sprintf("port %d is not one web_fetch connects to (allowed: %v)", p, f.cfg.Ports))
	}
	return nil
}

// allowedHost reports whether host:port is in Config.Allow (for names, any
// allowed address with that port would do: the dial still checks).
func (f *Fetcher) allowedHost(host string, port int) bool {
	for _, ap := range f.cfg.Allow {
		if int(ap.Port()) == port {
			if a, err := netip.ParseAddr(host); err != nil || a == ap.Addr() {
				return true
			}
		}
	}
	return false
}

func (f *Fetcher) allowed(ap netip.AddrPort) bool {
	return slices.Contains(f.cfg.Allow, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())) ||
		slices.Contains(f.cfg.Allow, ap)
}

// checkAddr refuses an address web_fetch must not connect to.
func (f *Fetcher) checkAddr(ap netip.AddrPort) error {
	if f.allowed(ap) {
		return nil
	}
	if why := whyBlocked(ap.Addr()); why != "" {
		return &BlockedError{Addr: ap.String(), Reason: fmt.Sprintf("%s is %s, not a public address", ap.Addr(), why)}
	}
	if !slices.Contains(f.cfg.Ports, int(ap.Port())) {
		return &BlockedError{Addr: ap.String(), Reason: fmt.Sprintf("port %d is not one web_fetch connects to (allowed: %v)", ap.Port(), f.cfg.Ports)}
	}
	return nil
}

// dial resolves the host itself, checks every address, and connects only
// to checked ones, by address: the name is never resolved again.
func (f *Fetcher) dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, &BlockedError{Addr: address, Reason: "not a valid port"}
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if a, ok, err := numericIPv4(host); ok {
		if err != nil {
			return nil, &BlockedError{Addr: address, Reason: err.Error()}
		}
		addrs = []netip.Addr{a}
	} else {
		addrs, err = f.cfg.Resolve(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("looking up %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("looking up %s: no addresses", host)
		}
	}
	var firstErr error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, uint16(port))
		if err := f.checkAddr(ap); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		conn, err := f.connect(ctx, network, ap.String())
		if err == nil {
			return conn, nil
		}
		if firstErr == nil || isBlocked(firstErr) {
			firstErr = err
		}
	}
	return nil, firstErr
}

func isBlocked(err error) bool {
	var b *BlockedError
	return errors.As(err, &b)
}

// control checks the address the socket is about to connect to: the last
// word, whatever resolved it.
func (f *Fetcher) control(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp4", "tcp6":
	default:
		return &BlockedError{Addr: address, Reason: "only TCP connections are made, not " + network}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &BlockedError{Addr: address, Reason: "not an IP address and port"}
	}
	return f.checkAddr(ap)
}

// checkRedirect re-checks every redirect: count, scheme, credentials, port
// and literal addresses (the dial checks the rest), and drops credentials
// headers so they never follow a redirect.
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if f.cfg.MaxRedirects < 0 || len(via) > f.cfg.MaxRedirects {
		return &BlockedError{URL: redact(req.URL), Reason: fmt.Sprintf("stopped after %d redirects", len(via)-1)}
	}
	if err := f.checkURL(req.URL); err != nil {
		return err
	}
	for _, h := range []string{"Authorization", "Proxy-Authorization", "Cookie"} {
		req.Header.Del(h)
	}
	return nil
}

// redact returns u without its password, for messages.
func redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.Redacted()
}

// Page is a fetched page.
type Page struct {
	// URL is the final URL, after redirects.
	URL string
	// Status is the HTTP status line's code and text ("200 OK").
	Status     string
	StatusCode int
	// ContentType is the response's media type.
	ContentType string
	// Body is the body read, at most MaxBytes after decompression.
	Body []byte
	// Truncated says the body was longer than MaxBytes and was cut.
	Truncated bool
}

// Fetch gets rawURL, following at most MaxRedirects redirects, within
// Timeout. A refused destination is a *BlockedError; a slow server is a
// timeout error. A status other than 2xx is not an error: the page says
// it.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (*Page, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return nil, &BlockedError{Reason: fmt.Sprintf("not a valid URL: %v", err)}
	}
	if err := f.checkURL(u); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, f.cfg.Timeout, &TimeoutError{After: f.cfg.Timeout})
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, &BlockedError{URL: redact(u), Reason: err.Error()}
	}
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, f.explain(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	if err != nil {
		return nil, f.explain(ctx, fmt.Errorf("reading the body after %d bytes: %w", len(body), err))
	}
	p := &Page{
		URL:         redact(resp.Request.URL),
		Status:      resp.Status,
		StatusCode:  resp.StatusCode,
		ContentType: resp.Header.Get("Content-Type"),
		Body:        body,
	}
	if int64(len(body)) > f.cfg.MaxBytes {
		p.Body, p.Truncated = body[:f.cfg.MaxBytes], true
	}
	return p, nil
}

// explain unwraps the client's *url.Error around a refusal, and says when
// the deadline was what stopped the fetch.
func (f *Fetcher) explain(ctx context.Context, err error) error {
	var b *BlockedError
	if errors.As(err, &b) {
		var ue *url.Error
		if b.URL == "" && errors.As(err, &ue) {
			c := *b
			c.URL = ue.URL
			return &c
		}
		return b
	}
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return fmt.Errorf("%w (%v)", cause, err)
		}
		return fmt.Errorf("canceled: %w", err)
	}
	return err
}
