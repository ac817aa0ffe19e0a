package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomkit/loom/tool"
)

// Options configure a [Client]. The zero value is usable; nil *Options
// means the zero value.
type Options struct {
	// ConnectTimeout bounds starting a server, the MCP handshake and the
	// listing of its tools, on first connect and on every reconnect.
	// Zero means 30 seconds.
	ConnectTimeout time.Duration

	// TerminateGrace is how long Close waits for a stdio server to exit
	// after closing its stdin before it sends SIGTERM, and again before
	// SIGKILL. Zero means 1 second.
	TerminateGrace time.Duration

	// BaseEnv is the environment a stdio server starts from, before
	// [ServerConfig].Env is applied. Nil means the environment of this
	// process (os.Environ), which includes any API keys in it: pass a
	// trimmed list to keep secrets from servers.
	BaseEnv []string

	// Stderr, when not nil, receives what stdio servers write to their
	// stderr, from a goroutine of its own; Close returns after the last
	// write (or after TerminateGrace, if something keeps the pipe open).
	// The last few KiB are always kept for error messages.
	Stderr io.Writer

	// HTTPClient sends the requests of streamable HTTP servers. Nil means
	// a client with no overall timeout (an MCP stream may stay open for
	// long); per-call deadlines come from the caller's context.
	HTTPClient *http.Client

	// MaxResultBytes caps the text of one tool result: a longer one keeps
	// its head and tail with a marker between them. Zero means 30,000;
	// negative means no cap. Images do not count towards it; each is
	// capped at MaxImageBytes.
	MaxResultBytes int

	// Logger receives the go-sdk's and this package's diagnostics
	// (failed refreshes, unexpected disconnects). Nil discards them.
	Logger *slog.Logger
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.ConnectTimeout <= 0 {
		v.ConnectTimeout = 30 * time.Second
	}
	if v.TerminateGrace <= 0 {
		v.TerminateGrace = time.Second
	}
	if v.MaxResultBytes == 0 {
		v.MaxResultBytes = 30_000
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	return v
}

// ErrClosed is returned, and named in error results, once a [Client] or
// [Group] is closed.
var ErrClosed = errors.New("MCP client is closed")

// ServerError reports that an MCP server could not be used: it could not
// be started or reached (Op "connect"), or listing its tools failed (Op
// "list tools"). Err says why and, for a stdio server that exited, how it
// exited and the end of its stderr.
type ServerError struct {
	Server string
	Op     string
	Err    error
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("MCP server %q: %s: %v", e.Server, e.Op, e.Err)
}

func (e *ServerError) Unwrap() error { return e.Err }

// Client is a connection to one MCP server whose tools it exposes as
// [tool.Tool]s. It is safe for concurrent use.
//
// When the server goes away (a stdio server exits, an HTTP server stops
// answering), the call in flight gets an error result and the next call
// starts the server again (stdio) or opens a new session (HTTP); when that
// fails too, the call's result says that the server is gone and why. A
// call is never repeated by the client: whether a call that was cut off
// had an effect is for the model or the user to judge.
//
// When the server announces that its tools changed, the client lists them
// again in the background; [Client.Tools] returns the new set afterwards
// and [Client.Changed] signals it. Drivers read Tools between turns.
type Client struct {
	cfg     ServerConfig
	opts    Options
	sdk     *sdk.Client
	ctx     context.Context // done once Close is called
	cancel  context.CancelFunc
	notices chan struct{} // list-changed notices for the refresher
	changed chan struct{}
	wg      sync.WaitGroup

	connecting chan struct{} // holds a value while (re)connecting

	mu      sync.Mutex
	sess    *sdk.ClientSession // nil while disconnected
	proc    *process           // the current child of a stdio server
	gone    error              // why the last session ended
	listing []*sdk.Tool
	digest  []byte // JSON of listing, to tell real changes
	tools   []tool.Tool
	schemas map[string]*argSchema // by tool name and schema, see buildTools
	closed  bool
}

// Connect starts or reaches the server cfg describes, performs the MCP
// handshake and lists its tools. ctx bounds only the connecting; the
// client lives until Close. The error is a [*ConfigError] for a bad cfg
// and a [*ServerError] otherwise.
func Connect(ctx context.Context, cfg ServerConfig, opts *Options) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{
		cfg:        cfg,
		opts:       opts.withDefaults(),
		notices:    make(chan struct{}, 1),
		changed:    make(chan struct{}, 1),
		connecting: make(chan struct{}, 1),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.sdk = sdk.NewClient(&sdk.Implementation{Name: "loom", Version: version()}, &sdk.ClientOptions{
		Logger: c.opts.Logger,
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case c.notices <- struct{}{}:
			default: // a refresh is already due
			}
		},
	})
	if err := c.connect(ctx); err != nil {
		c.cancel()
		return nil, err
	}
	c.wg.Add(1)
	go c.refresher()
	return c, nil
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// Name returns the server's name as configured.
func (c *Client) Name() string { return c.cfg.Name }

// Tools returns the server's tools as last listed, named
// <server>_<tool> (see the package doc for the naming rule). It does no IO.
// The slice is the caller's; the tools stay usable after the set changes
// (a call of a tool the server dropped gets the server's error).
func (c *Client) Tools() []tool.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.tools)
}

// Changed returns a channel that receives a value after the set returned
// by [Client.Tools] has changed (several changes may be reported by one
// value). Only one receiver sees each value; a [Group] reads it for the
// clients it holds.
func (c *Client) Changed() <-chan struct{} { return c.changed }

// Refresh lists the server's tools now, reconnecting first if the server
// went away, and reports through [Client.Changed] when the set differs.
// Drivers need not call it: notifications of the server trigger the same.
func (c *Client) Refresh(ctx context.Context) error {
	sess, _, err := c.session(ctx)
	if err != nil {
		return err
	}
	listing, err := listTools(ctx, sess)
	if err != nil {
		return &ServerError{Server: c.cfg.Name, Op: "list tools", Err: err}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == sess {
		c.install(listing)
	}
	return nil
}

// Close ends the session; a stdio server's process group is terminated
// (stdin closed, then SIGTERM, then SIGKILL, see
// [Options].TerminateGrace) and reaped before Close returns. Calls in
// flight end with an error result. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	sess, proc := c.sess, c.proc
	c.sess, c.gone = nil, ErrClosed
	c.mu.Unlock()
	c.cancel()
	// Wait for a reconnect in progress, which the cancel cut short, to
	// release what it started.
	c.connecting <- struct{}{}
	<-c.connecting
	if sess != nil {
		sess.Close()
	}
	if proc != nil {
		proc.terminate()
	}
	c.wg.Wait()
	return nil
}

// session returns the live session and, for a stdio server, its process,
// connecting again if there is none.
func (c *Client) session(ctx context.Context) (*sdk.ClientSession, *process, error) {
	c.mu.Lock()
	sess, proc, closed := c.sess, c.proc, c.closed
	c.mu.Unlock()
	if closed {
		return nil, nil, ErrClosed
	}
	if sess != nil {
		return sess, proc, nil
	}
	// One caller reconnects; the others wait for it, or for their ctx.
	select {
	case c.connecting <- struct{}{}:
		defer func() { <-c.connecting }()
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	c.mu.Lock()
	sess, proc = c.sess, c.proc
	c.mu.Unlock()
	if sess != nil {
		return sess, proc, nil
	}
	if err := c.connect(ctx); err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return nil, nil, c.gone
	}
	return c.sess, c.proc, nil
}

// connect opens a session, lists the tools and installs both.
func (c *Client) connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ConnectTimeout)
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)() // Close ends a connect in progress
	fail := func(op string, err error) error {
		return &ServerError{Server: c.cfg.Name, Op: op, Err: err}
	}

	var (
		transport sdk.Transport
		pt        *processTransport
	)
	if c.cfg.IsHTTP() {
		transport = c.httpTransport()
	} else {
		pt = &processTransport{start: func() (*process, error) {
			return startProcess(c.cfg, c.opts.BaseEnv, c.opts.Stderr, c.opts.TerminateGrace)
		}}
		transport = pt
	}
	cleanup := func() {
		if pt != nil && pt.got != nil {
			pt.got.terminate()
		}
	}
	describe := func(err error) error {
		if ctx.Err() != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		if pt != nil && pt.got != nil {
			return fmt.Errorf("%w; %s", err, pt.got.describe(time.Second))
		}
		return err
	}

	sess, err := c.sdk.Connect(ctx, transport, nil)
	if err != nil {
		cleanup()
		return fail("connect", describe(err))
	}
	listing, err := listTools(ctx, sess)
	if err != nil {
		sess.Close()
		cleanup()
		return fail("list tools", describe(err))
	}

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		sess.Close()
		cleanup()
		return ErrClosed
	}
	c.sess, c.gone = sess, nil
	c.proc = nil
	if pt != nil {
		c.proc = pt.got
	}
	c.install(listing)
	proc := c.proc
	c.wg.Add(1) // under mu, so that it happens before Close waits
	c.mu.Unlock()
	go c.watch(sess, proc)
	return nil
}

func (c *Client) httpTransport() sdk.Transport {
	hc := c.opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	if len(c.cfg.Headers) > 0 {
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		clone := *hc
		clone.Transport = &headerTransport{base: base, headers: c.cfg.Headers}
		hc = &clone
	}
	return &sdk.StreamableClientTransport{Endpoint: c.cfg.URL, HTTPClient: hc}
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// watch waits for sess to end and records why.
func (c *Client) watch(sess *sdk.ClientSession, proc *process) {
	defer c.wg.Done()
	err := sess.Wait()
	c.dropSession(sess, proc, err)
}

// dropSession forgets sess (if it is still the current one) with the
// reason it ended, and releases it.
func (c *Client) dropSession(sess *sdk.ClientSession, proc *process, cause error) {
	c.mu.Lock()
	current := c.sess == sess
	c.mu.Unlock()
	if !current {
		return
	}
	reason := c.describeEnd(proc, cause) // may wait briefly for the exit status
	c.mu.Lock()
	if c.sess != sess {
		c.mu.Unlock()
		return
	}
	c.sess, c.gone = nil, reason
	c.wg.Add(1) // under mu, so that it happens before Close waits
	c.mu.Unlock()
	c.opts.Logger.Warn("MCP server disconnected", "server", c.cfg.Name, "reason", reason)
	// Closing may wait for a stdio server's grace period; the caller must
	// not.
	go func() {
		defer c.wg.Done()
		sess.Close()
		if proc != nil {
			proc.terminate()
		}
	}()
}

// describeEnd says why a session ended.
func (c *Client) describeEnd(proc *process, cause error) error {
	if proc != nil {
		return fmt.Errorf("%w: %s", ErrServerGone, proc.describe(500*time.Millisecond))
	}
	if cause == nil {
		cause = errors.New("the server closed the session")
	}
	return fmt.Errorf("%w: %v", ErrServerGone, cause)
}

// ErrServerGone is wrapped by the reason a session ended unexpectedly.
var ErrServerGone = errors.New("MCP server gone")

// refresher lists the tools again after each list-changed notice.
func (c *Client) refresher() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.notices:
		}
		c.mu.Lock()
		sess := c.sess
		c.mu.Unlock()
		if sess == nil {
			continue // the reconnect lists them anyway
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.opts.ConnectTimeout)
		listing, err := listTools(ctx, sess)
		cancel()
		if err != nil {
			if c.ctx.Err() == nil {
				c.opts.Logger.Warn("MCP tools not refreshed", "server", c.cfg.Name, "error", err)
			}
			continue
		}
		c.mu.Lock()
		if c.sess == sess {
			c.install(listing)
		}
		c.mu.Unlock()
	}
}

// listTools lists every page of the server's tools.
func listTools(ctx context.Context, sess *sdk.ClientSession) ([]*sdk.Tool, error) {
	var out []*sdk.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// install makes listing the current set and signals a change. c.mu is held.
func (c *Client) install(listing []*sdk.Tool) {
	digest, err := json.Marshal(listing)
	if err == nil && c.digest != nil && bytes.Equal(digest, c.digest) {
		return
	}
	first := c.digest == nil
	c.listing, c.digest = listing, digest
	c.tools = c.buildTools(exposedNames(c.keys()))
	if !first {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
}

// keys returns the (server, tool) keys of the current listing. c.mu is held.
func (c *Client) keys() []toolKey {
	keys := make([]toolKey, len(c.listing))
	for i, t := range c.listing {
		keys[i] = toolKey{c.cfg.Name, t.Name}
	}
	return keys
}

// buildTools wraps the current listing under the given names, in the
// server's order. Each tool's input schema is resolved here, once per
// listing that brings it: a schema the previous listing had for the same
// tool is reused, not resolved (nor logged about) again. c.mu is held.
func (c *Client) buildTools(names map[toolKey]string) []tool.Tool {
	out := make([]tool.Tool, 0, len(c.listing))
	seen := make(map[string]bool, len(c.listing))
	schemas := make(map[string]*argSchema, len(c.listing))
	for _, t := range c.listing {
		if seen[t.Name] {
			continue // a server that lists a tool twice
		}
		seen[t.Name] = true
		rt := newRemoteTool(c, t, names[toolKey{c.cfg.Name, t.Name}])
		key := t.Name + "\x00" + string(rt.spec.Schema)
		s, ok := c.schemas[key]
		if !ok {
			var err error
			s, err = resolveArgSchema(rt.spec.Schema)
			if err != nil {
				c.opts.Logger.Warn("MCP tool input schema cannot be resolved; its arguments are passed to the server unvalidated",
					"server", c.cfg.Name, "tool", t.Name, "error", err)
			}
		}
		schemas[key] = s
		rt.schema = s
		out = append(out, rt)
	}
	c.schemas = schemas
	return out
}
