package loomtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomkit/loom/llm"
)

// Format is a wire format the server speaks.
type Format string

const (
	// OpenAI is Chat Completions: POST /v1/chat/completions.
	OpenAI Format = "openai"
	// Anthropic is Messages: POST /v1/messages.
	Anthropic Format = "anthropic"
)

// Config configures a Server. The zero Config is usable: a server with an
// empty script (every call gets a "script exhausted" error) that records
// and checks every request.
type Config struct {
	// Turns is the script both formats play, in order of arrival.
	Turns []Turn
	// OpenAI and Anthropic, when not nil, are played instead of Turns by
	// requests of that format. Each script keeps its own position.
	OpenAI, Anthropic []Turn
	// Func, when set, answers every request instead of the scripts. It
	// gets the recorded request (Decoded is filled in) and may be called
	// concurrently.
	Func func(*Request) Turn
	// Repeat starts a script over when it runs out, instead of failing.
	Repeat bool
	// APIKey, when set, is required: as x-api-key (Anthropic) or a Bearer
	// token (OpenAI). Other keys get the vendor's 401.
	APIKey string
	// NoRecord skips recording requests (and decoding them, unless Func or
	// checks need it): for benchmarks, whose requests would pile up.
	NoRecord bool
	// Lenient skips the checks of request bodies against the vendor's
	// rules (required fields, tool-call pairing, id and name patterns).
	Lenient bool
	// MaxBodyBytes bounds request bodies; larger ones get the vendor's 413.
	// Zero means 32 MiB (Anthropic's documented limit).
	MaxBodyBytes int64
}

// Request is a request the server received. It is not modified after it
// is recorded; its fields must not be modified by readers.
type Request struct {
	// Seq is the 1-based arrival number among all requests.
	Seq int
	// Format is the wire format of the endpoint called.
	Format Format
	// Method and Path are the HTTP method and URL path.
	Method, Path string
	// Header is the request's headers.
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Stream is the body's stream flag; IncludeUsage is OpenAI's
	// stream_options.include_usage.
	Stream, IncludeUsage bool
	// Decoded is the body read back into loom's vocabulary, as far as it
	// could be decoded. Decoded.Schema is the output schema asked for
	// (output_config.format, response_format of type json_schema).
	Decoded llm.Request
	// Err says why the server refused the request with a 4xx (or why no
	// turn was left), nil when it played a turn.
	Err error
	// Turn is the index of the turn played in its script, -1 when none
	// (refused, or answered by Func).
	Turn int
}

// Server is an HTTP server speaking the OpenAI Chat Completions and
// Anthropic Messages wire formats. It plays scripted turns, records
// requests and injects faults. It is safe for concurrent use; requests take
// turns in the order they arrive.
type Server struct {
	cfg     Config
	scripts map[Format]*script // nil entries share shared
	shared  *script

	mu     sync.Mutex
	reqs   []*Request
	seq    int
	active atomic.Int64

	closing   chan struct{}
	closeOnce sync.Once
	hs        *http.Server
	url       string
}

type script struct {
	mu    sync.Mutex
	slots []*slot
	next  int
}

// slot is a turn with its encodings, made once on first use.
type slot struct {
	turn  Turn
	index int
	enc   [2]struct {
		once sync.Once
		e    *encoded
	}
}

// encoded is a turn in one format, ready to write.
type encoded struct {
	blocking    []byte
	frames      [][]byte // stream events, end marker included
	full        []byte   // frames joined
	framesUsage [][]byte // OpenAI with include_usage
	fullUsage   []byte

	content int          // frames before the finish
	flood   *floodFrames // for Turn.Flood
}

func formatIndex(f Format) int {
	if f == Anthropic {
		return 1
	}
	return 0
}

// New returns a server for cfg that is not listening; it is an
// http.Handler. Use Start to listen on loopback.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, closing: make(chan struct{}), scripts: map[Format]*script{}}
	if s.cfg.MaxBodyBytes <= 0 {
		s.cfg.MaxBodyBytes = 32 << 20
	}
	s.shared = newScript(cfg.Turns)
	if cfg.OpenAI != nil {
		s.scripts[OpenAI] = newScript(cfg.OpenAI)
	}
	if cfg.Anthropic != nil {
		s.scripts[Anthropic] = newScript(cfg.Anthropic)
	}
	return s
}

func newScript(turns []Turn) *script {
	sc := &script{slots: make([]*slot, len(turns))}
	for i, t := range turns {
		sc.slots[i] = &slot{turn: t, index: i}
	}
	return sc
}

// Start returns a server for cfg listening on a random loopback port.
// It panics if it cannot listen, like httptest.NewServer.
func Start(cfg Config) *Server {
	s := New(cfg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("loomtest: listen on loopback: %v", err))
	}
	s.serve(l)
	return s
}

// Serve serves on l until Close; it returns at once.
func (s *Server) Serve(l net.Listener) {
	s.serve(l)
}

func (s *Server) serve(l net.Listener) {
	s.url = "http://" + l.Addr().String()
	s.hs = &http.Server{Handler: s, ReadHeaderTimeout: time.Minute}
	go s.hs.Serve(l)
}

// URL returns the server's root URL ("http://127.0.0.1:port"), empty when
// it is not listening.
func (s *Server) URL() string { return s.url }

// AnthropicURL returns the base URL for an Anthropic client (the root; the
// client adds /v1/messages).
func (s *Server) AnthropicURL() string { return s.url }

// OpenAIURL returns the base URL for an OpenAI client (root + "/v1"; the
// client adds /chat/completions).
func (s *Server) OpenAIURL() string { return s.url + "/v1" }

// Close stops the server: it ends silences and delays at once, and closes
// every connection. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.hs != nil {
			s.hs.Close()
		}
		close(s.closing)
	})
}

// Add appends turns to the shared script (Config.Turns).
func (s *Server) Add(turns ...Turn) {
	s.shared.mu.Lock()
	defer s.shared.mu.Unlock()
	for _, t := range turns {
		s.shared.slots = append(s.shared.slots, &slot{turn: t, index: len(s.shared.slots)})
	}
}

// Requests returns the recorded requests in arrival order.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.reqs...)
}

// LastRequest returns the last recorded request, or nil.
func (s *Server) LastRequest() *Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		return nil
	}
	return s.reqs[len(s.reqs)-1]
}

// Active returns how many requests are being answered right now: a client
// that abandoned a stream should leave none behind.
func (s *Server) Active() int { return int(s.active.Load()) }

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	defer s.active.Add(-1)
	var f Format
	switch r.URL.Path {
	case "/v1/chat/completions":
		f = OpenAI
	case "/v1/messages":
		f = Anthropic
	default:
		writeError(w, guessFormat(r), http.StatusNotFound, &APIError{Type: "not_found_error", Message: "loomtest: no endpoint at " + r.URL.Path + "; use POST /v1/chat/completions or POST /v1/messages"})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, f, http.StatusMethodNotAllowed, &APIError{Type: "invalid_request_error", Message: "loomtest: " + r.URL.Path + " takes POST, not " + r.Method})
		return
	}

	s.mu.Lock()
	s.seq++
	seq := s.seq
	s.mu.Unlock()
	w.Header().Set(requestIDHeader(f), requestID(seq))

	body, err := readBody(r, s.cfg.MaxBodyBytes)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.refuse(w, &Request{Seq: seq, Format: f, Method: r.Method, Path: r.URL.Path, Header: r.Header, Turn: -1}, http.StatusRequestEntityTooLarge,
				&APIError{Type: "request_too_large", Message: fmt.Sprintf("Request exceeds the maximum allowed number of bytes (%d).", s.cfg.MaxBodyBytes)})
			return
		}
		// The client went away while sending.
		return
	}
	rec := &Request{Seq: seq, Format: f, Method: r.Method, Path: r.URL.Path, Header: r.Header, Body: body, Turn: -1}

	if s.cfg.APIKey != "" && presentedKey(f, r.Header) != s.cfg.APIKey {
		s.refuse(w, rec, http.StatusUnauthorized, authError(f, r.Header))
		return
	}
	if f == Anthropic && r.Header.Get("anthropic-version") == "" && !s.cfg.Lenient {
		s.refuse(w, rec, http.StatusBadRequest, &APIError{Type: "invalid_request_error", Message: "anthropic-version: header is required"})
		return
	}

	if s.cfg.NoRecord && s.cfg.Lenient && s.cfg.Func == nil {
		rec.Stream, rec.IncludeUsage = peekStream(body)
	} else {
		var err error
		if f == Anthropic {
			err = decodeAnthropic(body, rec, !s.cfg.Lenient)
		} else {
			err = decodeOpenAI(body, rec, !s.cfg.Lenient)
		}
		if err != nil {
			s.refuse(w, rec, http.StatusBadRequest, &APIError{Type: "invalid_request_error", Message: err.Error()})
			return
		}
	}

	var t *Turn
	var enc *encoded
	if s.cfg.Func != nil {
		turn := s.cfg.Func(rec)
		t = &turn
		enc = encode(f, t, -1)
		s.record(rec)
	} else {
		sc := s.shared
		if own := s.scripts[f]; own != nil {
			sc = own
		}
		sl, n := sc.take(s.cfg.Repeat)
		if sl == nil {
			s.refuse(w, rec, http.StatusInternalServerError, &APIError{Type: "api_error", Message: fmt.Sprintf("loomtest: the script has no turn left for request %d (it has %d turns); add turns or set Repeat", seq, n)})
			return
		}
		rec.Turn = sl.index
		t = &sl.turn
		e := &sl.enc[formatIndex(f)]
		e.once.Do(func() { e.e = encode(f, t, sl.index) })
		enc = e.e
		s.record(rec)
	}
	s.play(w, r, f, t, enc, rec.Stream, rec.IncludeUsage)
}

func (s *Server) record(rec *Request) {
	if s.cfg.NoRecord {
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()
}

// refuse records rec with the reason and answers with a vendor error.
func (s *Server) refuse(w http.ResponseWriter, rec *Request, status int, e *APIError) {
	rec.Err = errors.New(e.Message)
	s.record(rec)
	w.Header().Set("x-should-retry", "false")
	writeError(w, rec.Format, status, e)
}

// take returns the next slot, or nil and the script's length.
func (sc *script) take(repeat bool) (*slot, int) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.next >= len(sc.slots) {
		if !repeat || len(sc.slots) == 0 {
			return nil, len(sc.slots)
		}
		sc.next = 0
	}
	sl := sc.slots[sc.next]
	sc.next++
	return sl, len(sc.slots)
}

func readBody(r *http.Request, limit int64) ([]byte, error) {
	rd := http.MaxBytesReader(nil, r.Body, limit)
	if r.ContentLength > 0 && r.ContentLength <= limit {
		buf := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	return io.ReadAll(rd)
}

func requestIDHeader(f Format) string {
	if f == Anthropic {
		return "request-id"
	}
	return "x-request-id"
}

func requestID(seq int) string {
	return "req_loomtest_" + strconv.Itoa(seq)
}

func guessFormat(r *http.Request) Format {
	if r.Header.Get("x-api-key") != "" || r.Header.Get("anthropic-version") != "" {
		return Anthropic
	}
	return OpenAI
}

func presentedKey(f Format, h http.Header) string {
	if f == Anthropic {
		if k := h.Get("x-api-key"); k != "" {
			return k
		}
	}
	auth := h.Get("Authorization")
	if k, ok := cutPrefixFold(auth, "Bearer "); ok {
		return k
	}
	return ""
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && bytes.EqualFold([]byte(s[:len(prefix)]), []byte(prefix)) {
		return s[len(prefix):], true
	}
	return s, false
}

func authError(f Format, h http.Header) *APIError {
	if f == Anthropic {
		if h.Get("x-api-key") == "" {
			return &APIError{Type: "authentication_error", Message: "x-api-key header is required"}
		}
		return &APIError{Type: "authentication_error", Message: "invalid x-api-key"}
	}
	return &APIError{Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."}
}

// play writes the answer of t, with its faults.
func (s *Server) play(w http.ResponseWriter, r *http.Request, f Format, t *Turn, enc *encoded, stream, includeUsage bool) {
	if t.Reset {
		abort(w, true)
		return
	}
	if !s.wait(w, r, t.HeaderDelay) {
		return
	}
	h := w.Header()
	for k, vs := range t.Header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}

	if t.failing(stream) {
		if t.Body != "" {
			ct := t.ContentType
			if ct == "" {
				ct = "application/json"
				if stream {
					ct = "text/event-stream"
				}
			}
			h.Set("Content-Type", ct)
			status := t.Status
			if status == 0 {
				status = http.StatusOK
			}
			w.WriteHeader(status)
			io.WriteString(w, t.Body)
			s.cut(w, r, f, t)
			return
		}
		status := t.Status
		if status == 0 || status == http.StatusOK {
			status = statusForType(t.Error.Type)
		}
		writeError(w, f, status, t.Error)
		return
	}

	if t.Flood != "" {
		s.flood(w, r, t, enc, stream)
		return
	}
	if !stream {
		h.Set("Content-Type", "application/json")
		if t.Cut == CutNone {
			h.Set("Content-Length", strconv.Itoa(len(enc.blocking)))
			w.Write(enc.blocking)
			return
		}
		w.WriteHeader(http.StatusOK)
		w.Write(enc.blocking[:len(enc.blocking)/2])
		s.cut(w, r, f, t)
		return
	}

	frames, full := enc.frames, enc.full
	if includeUsage && enc.framesUsage != nil {
		frames, full = enc.framesUsage, enc.fullUsage
	}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if t.EventDelay <= 0 && t.Cut == CutNone && t.Error == nil {
		w.Write(full)
		return
	}
	rc := http.NewResponseController(w)
	rc.Flush()
	stop := len(frames)
	if t.Error != nil {
		stop = min(max(t.ErrorAfter, 0), len(frames)-1)
	}
	cut := t.Cut != CutNone && t.CutAfter < stop
	if cut {
		stop = max(t.CutAfter, 0)
	}
	for i := 0; i < stop; i++ {
		if i > 0 && t.EventDelay > 0 && !s.wait(w, r, t.EventDelay) {
			return
		}
		w.Write(frames[i])
		if t.EventDelay > 0 {
			rc.Flush()
		}
	}
	rc.Flush()
	switch {
	case cut:
		s.cut(w, r, f, t)
	case t.Error != nil:
		if t.EventDelay > 0 && stop > 0 && !s.wait(w, r, t.EventDelay) {
			return
		}
		w.Write(errorFrame(f, t.Error))
		rc.Flush()
	default:
		s.cut(w, r, f, t) // a Cut after every event
	}
}

// cut applies t.Cut after what was written so far.
func (s *Server) cut(w http.ResponseWriter, r *http.Request, f Format, t *Turn) {
	switch t.Cut {
	case CutAbort:
		http.NewResponseController(w).Flush()
		abort(w, false)
	case CutSilence:
		rc := http.NewResponseController(w)
		rc.Flush()
		var tick <-chan time.Time
		if t.PingEvery > 0 {
			tk := time.NewTicker(t.PingEvery)
			defer tk.Stop()
			tick = tk.C
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case <-s.closing:
				abort(w, false)
				return
			case <-tick:
				w.Write(pingFrame(f))
				rc.Flush()
			}
		}
	}
}

// wait waits d, or less if the client leaves or the server closes; it
// reports whether the full wait passed.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.closing:
		// Do not let the handler's return pass for a complete answer.
		abort(w, false)
		return false
	}
}

// abort closes the connection under w without ending the response (what
// was written and flushed reaches the client; the rest is lost): with a
// reset when rst is set (data in flight may be lost), else with a plain
// close (the client reads what was sent, then an unexpected EOF).
func abort(w http.ResponseWriter, rst bool) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): panicking with ErrAbortHandler makes the
		// server reset the stream without logging.
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok && rst {
		tc.SetLinger(0)
	}
	conn.Close()
}

func writeError(w http.ResponseWriter, f Format, status int, e *APIError) {
	body := errorBody(f, status, e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
