package recorded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/anthropic"
	"github.com/loomkit/loom/model/openai"
)

// recording is one NAME.expect.json; see the package doc.
type recording struct {
	Format      string            `json:"format"`
	Call        string            `json:"call"`
	Status      int               `json:"status"`
	ContentType string            `json:"content_type"`
	Headers     map[string]string `json:"headers"`
	Body        string            `json:"body"`
	Framing     string            `json:"framing"`
	Want        want              `json:"want"`

	name string // provider/NAME
	data []byte // the body file
}

type want struct {
	ID        string         `json:"id"`
	Model     string         `json:"model"`
	Text      *string        `json:"text"`
	Thinking  []wantThinking `json:"thinking"`
	Calls     []wantCall     `json:"calls"`
	Finish    *string        `json:"finish"`
	Usage     *wantUsage     `json:"usage"`
	RequestID string         `json:"request_id"`
	Error     *wantError     `json:"error"`
}

type wantThinking struct {
	Text      string  `json:"text"`
	Signature *string `json:"signature"`
	Redacted  string  `json:"redacted"`
}

type wantCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wantUsage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cache_read"`
	CacheWrite int64 `json:"cache_write"`
	Reasoning  int64 `json:"reasoning"`
}

type wantError struct {
	Kind      model.Kind `json:"kind"`
	Status    int        `json:"status"`
	Type      string     `json:"type"`
	Retryable *bool      `json:"retryable"`
}

const (
	minRecordings = 60
	minProviders  = 10
)

// loadCorpus reads every expectation under testdata and its body.
func loadCorpus(t *testing.T) []*recording {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recordings under testdata")
	}
	var recs []*recording
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rec := new(recording)
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(rec); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rec.name = path.Join(filepath.Base(filepath.Dir(f)), strings.TrimSuffix(filepath.Base(f), ".expect.json"))
		if err := rec.check(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rec.data, err = os.ReadFile(filepath.Join(filepath.Dir(f), rec.Body))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// check refuses an expectation that could not be replayed or checked.
func (r *recording) check() error {
	switch {
	case r.Format != "openai" && r.Format != "anthropic":
		return fmt.Errorf("format %q", r.Format)
	case r.Call != "generate" && r.Call != "stream":
		return fmt.Errorf("call %q", r.Call)
	case r.Framing != "raw" && r.Framing != "jsonl":
		return fmt.Errorf("framing %q", r.Framing)
	case r.Status < 100 || r.Status > 599 || r.Status == errHarness:
		return fmt.Errorf("status %d", r.Status)
	case r.Body == "" || strings.ContainsAny(r.Body, `/\`):
		return fmt.Errorf("body %q", r.Body)
	case r.ContentType == "":
		return errors.New("no content type")
	}
	w := r.Want
	if w.Error != nil {
		if w.Error.Kind == "" {
			return errors.New("an error expectation names no kind")
		}
		if w.Text != nil || w.Finish != nil || w.Calls != nil || w.Thinking != nil || w.Usage != nil || w.ID != "" {
			return errors.New("an error expectation also expects an answer")
		}
		return nil
	}
	if w.Text == nil || w.Finish == nil || w.Calls == nil || w.Thinking == nil {
		return errors.New("an answer expectation needs text, thinking, calls and finish (empty ones too)")
	}
	return nil
}

// frames returns the bytes to send, cut where the server flushes.
func (r *recording) frames() ([][]byte, error) {
	if r.Framing == "raw" {
		if r.Call == "generate" || !strings.HasPrefix(r.ContentType, "text/event-stream") {
			return [][]byte{r.data}, nil
		}
		return splitEvents(r.data), nil
	}
	var out [][]byte
	for line := range strings.Lines(string(r.data)) {
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		switch r.Format {
		case "openai":
			out = append(out, []byte("data: "+line+"\n\n"))
		case "anthropic":
			var ev struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Type == "" {
				return nil, fmt.Errorf("a line without a type: %.80s", line)
			}
			out = append(out, []byte("event: "+ev.Type+"\ndata: "+line+"\n\n"))
		}
	}
	if r.Format == "openai" {
		out = append(out, []byte("data: [DONE]\n\n"))
	}
	return out, nil
}

// splitEvents cuts an event stream after each blank line; the pieces
// joined are the input.
func splitEvents(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		end := -1
		switch {
		case i+1 < len(b) && b[i+1] == '\n':
			end = i + 2
		case i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n':
			end = i + 3
		}
		if end > 0 {
			out = append(out, b[start:end])
			start, i = end, end-1
		}
	}
	if start < len(b) {
		out = append(out, b[start:])
	}
	return out
}

// pieceSize is the size of the writes of the second replay of a stream
// of n bytes: small and odd, so event lines, "data:" prefixes and UTF-8
// sequences are split across reads, but never more than about maxPieces
// writes, which keeps the long streams fast.
func pieceSize(n int) int {
	const maxPieces = 1500
	return max(7, (n+maxPieces-1)/maxPieces) | 1
}

// server serves every recording at /<mode>/<provider>/<name>/ followed by
// the path the adapter appends; mode is "events" (flushed per event) or
// "pieces" (flushed every few bytes).
type server struct {
	srv  *httptest.Server
	recs map[string]*recording
}

func newServer(t *testing.T, recs []*recording) *server {
	s := &server{recs: map[string]*recording{}}
	for _, r := range recs {
		s.recs[r.name] = r
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func endpoint(format string) string {
	if format == "openai" {
		return "/v1/chat/completions"
	}
	return "/v1/messages"
}

// errHarness is the status of the server's own refusals, which no
// recording has.
const errHarness = http.StatusTeapot

func (s *server) serve(w http.ResponseWriter, req *http.Request) {
	mode, rest, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	var rec *recording
	for name, r := range s.recs {
		if rest == name+endpoint(r.Format) {
			rec = r
		}
	}
	if rec == nil || (mode != "events" && mode != "pieces") {
		http.Error(w, "no recording at "+req.URL.Path, errHarness)
		return
	}
	if req.Method != http.MethodPost {
		http.Error(w, "want POST, got "+req.Method, errHarness)
		return
	}
	var body struct {
		Stream bool `json:"stream"`
	}
	if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&body); err != nil {
		http.Error(w, "request body: "+err.Error(), errHarness)
		return
	}
	if body.Stream != (rec.Call == "stream") {
		http.Error(w, fmt.Sprintf("the request has stream=%v; the recording answers a %s call", body.Stream, rec.Call), errHarness)
		return
	}
	frames, err := rec.frames()
	if err != nil {
		http.Error(w, err.Error(), errHarness)
		return
	}
	if mode == "pieces" {
		all := bytes.Join(frames, nil)
		frames = cut(all, pieceSize(len(all)))
	}
	h := w.Header()
	h.Set("Content-Type", rec.ContentType)
	for k, v := range rec.Headers {
		h.Set(k, v)
	}
	w.WriteHeader(rec.Status)
	f, _ := w.(http.Flusher)
	for _, fr := range frames {
		if _, err := w.Write(fr); err != nil {
			return
		}
		if f != nil {
			f.Flush()
		}
	}
}

func cut(b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) > n {
		out = append(out, b[:n])
		b = b[n:]
	}
	return append(out, b)
}

// model returns the adapter for r, pointed at the server in mode.
func (s *server) model(r *recording, mode string) model.Model {
	base := s.srv.URL + "/" + mode + "/" + r.name
	if r.Format == "openai" {
		return openai.New(openai.Config{BaseURL: base + "/v1", APIKey: "test", Model: "recorded", HTTPClient: s.srv.Client()})
	}
	return anthropic.New(anthropic.Config{BaseURL: base, APIKey: "test", Model: "recorded", HTTPClient: s.srv.Client()})
}

func TestReplay(t *testing.T) {
	recs := loadCorpus(t)
	s := newServer(t, recs)
	for _, rec := range recs {
		t.Run(rec.name, func(t *testing.T) {
			for _, p := range s.replay(t, rec, "events") {
				t.Error(p)
			}
			if rec.Call == "stream" && rec.Status == http.StatusOK {
				t.Run("pieces", func(t *testing.T) {
					for _, p := range s.replay(t, rec, "pieces") {
						t.Error(p)
					}
				})
			}
		})
	}
}

// outcome is what a call gave: the answer, the error, and what was wrong
// with the stream itself.
type outcome struct {
	resp   llm.Response
	err    error
	stream []string
}

func (s *server) call(t *testing.T, rec *recording, mode string) outcome {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	m := s.model(rec, mode)
	req := llm.Request{Messages: []llm.Message{llm.UserText("hi")}}
	if rec.Call == "generate" {
		resp, err := m.Generate(ctx, req)
		return outcome{resp: resp, err: err}
	}
	return collect(m.Stream(ctx, req))
}

// replay makes the recording's call and returns every way the outcome
// differs from the expectation.
func (s *server) replay(t *testing.T, rec *recording, mode string) []string {
	o := s.call(t, rec, mode)
	return append(o.stream, compare(rec, rec.Want, o.resp, o.err)...)
}

// collect folds a stream, checking the end-of-stream contract: an error is
// the last element, and an answer that ends without error ends with its
// one Finish.
func collect(seq func(func(llm.Event, error) bool)) outcome {
	var (
		o       outcome
		acc     llm.Accumulator
		evs     []llm.Event
		afterEr int
	)
	for ev, e := range seq {
		switch {
		case o.err != nil:
			afterEr++
		case e != nil:
			o.err = e
			if ev != nil {
				o.stream = append(o.stream, fmt.Sprintf("the error element carries an event %T", ev))
			}
		case ev == nil:
			o.stream = append(o.stream, "a nil event without an error")
		default:
			evs = append(evs, ev)
			acc.Add(ev)
		}
	}
	if afterEr > 0 {
		o.stream = append(o.stream, fmt.Sprintf("%d elements after the error %v", afterEr, o.err))
	}
	if o.err != nil {
		return o
	}
	finishes := 0
	for _, ev := range evs {
		if _, ok := ev.(llm.Finish); ok {
			finishes++
		}
	}
	if finishes != 1 {
		o.stream = append(o.stream, fmt.Sprintf("the stream yielded %d Finish events, want 1", finishes))
	} else if _, ok := evs[len(evs)-1].(llm.Finish); !ok {
		o.stream = append(o.stream, fmt.Sprintf("the stream's last event is %T, want its Finish", evs[len(evs)-1]))
	}
	o.resp = acc.Response()
	return o
}

// compare returns every way resp and err differ from w.
func compare(rec *recording, w want, resp llm.Response, err error) []string {
	var ps []string
	bad := func(format string, args ...any) { ps = append(ps, fmt.Sprintf(format, args...)) }
	if w.Error != nil {
		if err == nil {
			return []string{fmt.Sprintf("the call succeeded, want a %s error", w.Error.Kind)}
		}
		var me *model.Error
		if !errors.As(err, &me) {
			return []string{fmt.Sprintf("the error is %T (%v), want a *model.Error", err, err)}
		}
		if me.Kind != w.Error.Kind {
			bad("kind = %s, want %s (%v)", me.Kind, w.Error.Kind, err)
		}
		if w.Error.Status != 0 && me.Status != w.Error.Status {
			bad("status = %d, want %d", me.Status, w.Error.Status)
		}
		if w.Error.Type != "" && me.Type != w.Error.Type {
			bad("type = %q, want %q", me.Type, w.Error.Type)
		}
		if w.Error.Retryable != nil && me.Retryable() != *w.Error.Retryable {
			bad("retryable = %v, want %v (%v)", me.Retryable(), *w.Error.Retryable, err)
		}
		if w.RequestID != "" && me.RequestID != w.RequestID {
			bad("request id = %q, want %q", me.RequestID, w.RequestID)
		}
		return ps
	}
	if err != nil {
		return []string{fmt.Sprintf("the call failed: %v", err)}
	}
	if resp.Truncated {
		bad("the response is Truncated")
	}
	if resp.ID != w.ID {
		bad("id = %q, want %q", resp.ID, w.ID)
	}
	if resp.Model != w.Model {
		bad("model = %q, want %q", resp.Model, w.Model)
	}
	if w.RequestID != "" && resp.RequestID != w.RequestID {
		bad("request id = %q, want %q", resp.RequestID, w.RequestID)
	}
	if got := resp.Text(); got != *w.Text {
		bad("text differs: %s", diff(got, *w.Text))
	}
	ps = append(ps, compareThinking(resp.Message, w.Thinking)...)
	ps = append(ps, compareCalls(rec, resp.Message, w.Calls)...)
	if got := string(resp.FinishReason); got != *w.Finish {
		bad("finish = %q, want %q", got, *w.Finish)
	}
	return append(ps, compareUsage(resp.Usage, w.Usage)...)
}

func compareThinking(msg llm.Message, want []wantThinking) []string {
	var got []llm.Thinking
	for _, p := range msg.Parts {
		if th, ok := p.(llm.Thinking); ok {
			got = append(got, th)
		}
	}
	if len(got) != len(want) {
		return []string{fmt.Sprintf("%d thinking parts, want %d", len(got), len(want))}
	}
	var ps []string
	for i, w := range want {
		g := got[i]
		if g.Text != w.Text {
			ps = append(ps, fmt.Sprintf("thinking %d text differs: %s", i, diff(g.Text, w.Text)))
		}
		if w.Signature != nil && g.Signature != *w.Signature {
			ps = append(ps, fmt.Sprintf("thinking %d signature differs: %s", i, diff(g.Signature, *w.Signature)))
		}
		if g.Redacted != w.Redacted {
			ps = append(ps, fmt.Sprintf("thinking %d redacted data differs: %s", i, diff(g.Redacted, w.Redacted)))
		}
	}
	return ps
}

func compareCalls(rec *recording, msg llm.Message, want []wantCall) []string {
	got := msg.ToolCalls()
	if len(got) != len(want) {
		return []string{fmt.Sprintf("%d tool calls, want %d: %+v", len(got), len(want), got)}
	}
	var ps []string
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID || g.Name != w.Name {
			ps = append(ps, fmt.Sprintf("call %d is %q %q, want %q %q", i, g.ID, g.Name, w.ID, w.Name))
		}
		if !sameArguments(rec, g.Arguments, w.Arguments) {
			ps = append(ps, fmt.Sprintf("call %d arguments = %q, want %q", i, g.Arguments, w.Arguments))
		}
		if g.Malformed || g.Incomplete {
			ps = append(ps, fmt.Sprintf("call %d is malformed=%v incomplete=%v", i, g.Malformed, g.Incomplete))
		}
	}
	return ps
}

// sameArguments compares arguments exactly, except Anthropic's blocking
// input, which the API sends as a JSON value, not as text: that is
// compared as JSON (numbers as written).
func sameArguments(rec *recording, got, want string) bool {
	if rec.Format == "anthropic" && rec.Call == "generate" {
		g, gerr := decodeJSON(got)
		w, werr := decodeJSON(want)
		return gerr == nil && werr == nil && reflect.DeepEqual(g, w)
	}
	return got == want
}

func decodeJSON(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one value")
	}
	return v, nil
}

func compareUsage(got llm.Usage, want *wantUsage) []string {
	if want == nil {
		want = &wantUsage{}
	}
	fields := []struct {
		name      string
		got, want int64
	}{
		{"input", got.InputTokens, want.Input},
		{"output", got.OutputTokens, want.Output},
		{"cache read", got.CacheReadTokens, want.CacheRead},
		{"cache write", got.CacheWriteTokens, want.CacheWrite},
		{"reasoning", got.ReasoningTokens, want.Reasoning},
		{"total", got.Total(), want.Input + want.Output},
	}
	var ps []string
	for _, f := range fields {
		if f.got != f.want {
			ps = append(ps, fmt.Sprintf("usage %s = %d, want %d", f.name, f.got, f.want))
		}
	}
	return ps
}

// diff describes how two long strings differ: their lengths and the first
// differing place.
func diff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	excerpt := func(s string) string {
		from := max(0, i-20)
		to := min(len(s), i+40)
		return fmt.Sprintf("%q", s[from:to])
	}
	return fmt.Sprintf("got %d bytes, want %d; from byte %d got %s, want %s", len(got), len(want), i, excerpt(got), excerpt(want))
}

// TestCorpus checks the corpus itself: each expectation's body exists and
// each file is used, each body has its SOURCES.md line, and the corpus is
// as wide as promised.
func TestCorpus(t *testing.T) {
	recs := loadCorpus(t)
	sources, err := os.ReadFile(filepath.Join("testdata", "SOURCES.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		files[i] = filepath.ToSlash(strings.TrimPrefix(f, "testdata"+string(filepath.Separator)))
	}
	for _, p := range corpusProblems(recs, string(sources), files) {
		t.Error(p)
	}
	providers := map[string]bool{}
	for _, r := range recs {
		providers[provider(r)] = true
	}
	if len(recs) < minRecordings {
		t.Errorf("%d recordings, want at least %d", len(recs), minRecordings)
	}
	if len(providers) < minProviders {
		t.Errorf("%d providers (%v), want at least %d", len(providers), slices.Sorted(maps.Keys(providers)), minProviders)
	}
}

func provider(r *recording) string {
	prov, _, _ := strings.Cut(r.name, "/")
	return prov
}

// corpusProblems checks recordings against the lines of SOURCES.md and the
// files under testdata/<provider>/ (as "provider/file").
func corpusProblems(recs []*recording, sources string, files []string) []string {
	var ps []string
	lines := map[string]int{} // provider/body -> lines naming it
	for line := range strings.Lines(sources) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 8 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		prov, body, repo, file, commit, lic := cells[1], cells[2], cells[3], cells[4], cells[5], cells[6]
		if prov == "Provider" || strings.HasPrefix(prov, "---") {
			continue
		}
		if !strings.Contains(repo, "/") || file == "" || len(commit) != 40 || lic == "" {
			ps = append(ps, fmt.Sprintf("SOURCES.md: %q lacks a repository, path, commit or licence", strings.TrimSpace(line)))
		}
		lines[prov+"/"+body]++
	}
	used := map[string]bool{}
	for _, r := range recs {
		key := provider(r) + "/" + r.Body
		if used[key] {
			ps = append(ps, fmt.Sprintf("%s: body %s is used by another recording too", r.name, r.Body))
		}
		used[key] = true
		used[r.name+".expect.json"] = true
		if lines[key] != 1 {
			ps = append(ps, fmt.Sprintf("%s: SOURCES.md has %d lines for %s, want 1", r.name, lines[key], r.Body))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(lines)) {
		if !used[key] {
			ps = append(ps, fmt.Sprintf("SOURCES.md names %s, which no recording uses", key))
		}
	}
	for _, f := range files {
		if !used[f] {
			ps = append(ps, fmt.Sprintf("testdata/%s is no recording's body or expectation", f))
		}
	}
	return ps
}
