package modeltest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/internal/pipenet"
)

// Setup is what the suite hands an adapter's factory for one model.
type Setup struct {
	// BaseURL is the adapter's base URL on the test server (the root for
	// Anthropic, the root + "/v1" for OpenAI).
	BaseURL string
	// HTTPClient is the client to send with; nil means the adapter's
	// default. Tests that run on a fake clock pass an in-memory client.
	HTTPClient *http.Client
	// IdleTimeout and Timeout, when not zero, are the adapter's stream
	// idle timeout and per-call timeout; zero means the adapter's default.
	IdleTimeout, Timeout time.Duration
	// MaxAnswerBytes, MaxParts and MaxToolCalls, when not zero, are the
	// adapter's bounds on one answer's content bytes (text, thinking,
	// tool-call names and arguments), parts and tool calls; zero means
	// the adapter's defaults, which must be at most 64 MiB, 1<<16 parts
	// and 1<<16 calls.
	MaxAnswerBytes         int64
	MaxParts, MaxToolCalls int
}

// Suite describes an adapter to check.
type Suite struct {
	// Format is the wire format the adapter speaks.
	Format loomtest.Format
	// New returns the model under test for setup. It must send an API key
	// and a model name of its own choosing.
	New func(setup Setup) model.Model
	// GoldenDir, when set, holds the request bodies of the multi-tool
	// round trip (round_trip_{blocking,stream}_{1,2}.json); the suite
	// compares the bodies it sees with them. Run the tests with
	// UPDATE_GOLDEN=1 to write them.
	GoldenDir string
}

// Run checks that an adapter speaks its wire format the way the vendor
// documents it, against loomtest over HTTP: streaming and blocking calls
// give the same response; a multi-tool round trip sends requests the
// vendor would accept (and, with GoldenDir, exactly the committed bodies);
// every injected fault becomes the right model.Kind; timeouts fire; the
// model.Retry middleware around the adapter retries what it should and
// nothing else; every stream of the pathological corpus
// (testdata/streams/<format>) ends the way its first line says; and an
// answer past the bounds on its size (one that never ends, too many calls,
// too many parts, huge arguments) fails with model.KindAnswerTooLarge
// before it costs much memory.
func Run(t *testing.T, s Suite) {
	t.Helper()
	if s.New == nil || (s.Format != loomtest.OpenAI && s.Format != loomtest.Anthropic) {
		t.Fatal("modeltest.Run: the Suite needs New and a Format")
	}
	t.Run("StreamEqualsBlocking", s.testStreamEqualsBlocking)
	t.Run("RoundTrip", s.testRoundTrip)
	t.Run("Faults", s.testFaults)
	t.Run("Timeouts", s.testTimeouts)
	t.Run("Cancel", s.testCancel)
	t.Run("SingleUse", s.testSingleUse)
	t.Run("Retry", s.testRetry)
	t.Run("Corpus", s.testCorpus)
	t.Run("Bounds", s.testBounds)
}

func (s Suite) baseURL(root string) string {
	if s.Format == loomtest.OpenAI {
		return root + "/v1"
	}
	return root
}

// start serves cfg on loopback and returns the model and the server.
func (s Suite) start(t *testing.T, cfg loomtest.Config, setup Setup) (model.Model, *loomtest.Server) {
	t.Helper()
	srv := loomtest.Start(cfg)
	t.Cleanup(srv.Close)
	setup.BaseURL = s.baseURL(srv.URL())
	return s.New(setup), srv
}

// startPipe serves cfg in memory, for tests inside a synctest bubble; the
// server is closed when the bubble's test ends.
func (s Suite) startPipe(t *testing.T, cfg loomtest.Config, setup Setup) (model.Model, *loomtest.Server) {
	t.Helper()
	srv := loomtest.New(cfg)
	client, stop := pipenet.Serve(srv)
	t.Cleanup(func() {
		srv.Close()
		stop()
	})
	setup.BaseURL = s.baseURL("http://pipenet")
	setup.HTTPClient = client
	return s.New(setup), srv
}

var baseRequest = llm.Request{
	System:   "You are a terse assistant.",
	Messages: []llm.Message{llm.UserText("Look at the repository.")},
	Tools: []llm.ToolSpec{
		{Name: "read_file", Description: "Read a file.", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		{Name: "list_dir", Description: "List a directory.", Schema: json.RawMessage(`{"type":"object","properties":{}}`)},
		{Name: "grep", Description: "Search files.", Schema: json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"}}}`)},
	},
}

// StreamCall ranges m.Stream and returns the fold of its events, the
// events, and the error that ended it.
func StreamCall(ctx context.Context, m model.Model, req llm.Request) (llm.Response, []llm.Event, error) {
	var acc llm.Accumulator
	var evs []llm.Event
	for e, err := range m.Stream(ctx, req) {
		if err != nil {
			if e != nil {
				return acc.Response(), evs, fmt.Errorf("modeltest: the stream yielded an event with its error: %w", err)
			}
			return acc.Response(), evs, err
		}
		if e == nil {
			return acc.Response(), evs, errors.New("modeltest: the stream yielded a nil event without an error")
		}
		evs = append(evs, e)
		acc.Add(e)
	}
	return acc.Response(), evs, nil
}

// comparable strips what differs between two calls of the same answer.
func comparable(r llm.Response) llm.Response {
	r.Raw = nil
	r.RequestID = ""
	if r.Message.Parts == nil {
		r.Message.Parts = []llm.Part{}
	}
	return r
}

func (s Suite) testStreamEqualsBlocking(t *testing.T) {
	long := strings.Repeat("Grüße, wörld ✓. ", 40)
	turns := map[string]loomtest.Turn{
		"text": loomtest.Text("Hello, world.").WithUsage(llm.Usage{InputTokens: 12, OutputTokens: 5}),
		"chunked": {
			Parts: []llm.Part{
				llm.Thinking{Text: "The user wants files.", Signature: "c2lnbmF0dXJl"},
				llm.Text{Text: long},
				loomtest.Call("call_01", "read_file", `{"path":"main.go"}`),
				loomtest.Call("call_02", "grep", `{"pattern":"TODO","path":"."}`),
			},
			Usage: llm.Usage{InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 1000},
			Chunk: 3,
		},
		"empty arguments": loomtest.ToolCalls(loomtest.Call("call_03", "list_dir", "")),
		"malformed arguments": func() loomtest.Turn {
			t := loomtest.ToolCalls(loomtest.Call("call_04", "read_file", `{"path": "a.go",}`))
			t.Chunk = 5
			return t
		}(),
		"length":                    {Parts: []llm.Part{llm.Text{Text: "cut here"}}, Finish: llm.FinishLength, Usage: llm.Usage{InputTokens: 3, OutputTokens: 2}},
		"length inside a tool call": {Parts: []llm.Part{llm.Text{Text: "Reading."}, loomtest.Call("call_05", "read_file", `{"path":"ma`)}, Finish: llm.FinishLength, Chunk: 4},
		"content filter":            {Parts: []llm.Part{llm.Text{Text: "I can't help with that."}}, Finish: llm.FinishContentFilter},
		"pings":                     {Parts: []llm.Part{llm.Text{Text: "pong"}}, Pings: 3},
	}
	for name, turn := range turns {
		t.Run(name, func(t *testing.T) {
			m, srv := s.start(t, loomtest.Config{Repeat: true, Turns: []loomtest.Turn{turn}}, Setup{})
			ctx := context.Background()
			blocking, err := m.Generate(ctx, baseRequest)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			streamed, evs, err := StreamCall(ctx, m, baseRequest)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if len(blocking.Raw) == 0 {
				t.Error("Generate kept no Raw body")
			}
			if blocking.RequestID == "" || streamed.RequestID == "" {
				t.Errorf("request ids: blocking %q, stream %q", blocking.RequestID, streamed.RequestID)
			}
			if b, st := comparable(blocking), comparable(streamed); !reflect.DeepEqual(b, st) {
				t.Fatalf("stream and blocking differ\nblocking %+v\nstream   %+v\nevents %v", b, st, evs)
			}
			if _, ok := evs[len(evs)-1].(llm.Finish); !ok {
				t.Errorf("the last event is %T, want llm.Finish", evs[len(evs)-1])
			}
			s.checkMatchesTurn(t, turn, blocking)
			for _, r := range srv.Requests() {
				if r.Err != nil {
					t.Errorf("the server refused request %d: %v", r.Seq, r.Err)
				}
			}
		})
	}
}

// checkMatchesTurn checks that resp says what the scripted turn said.
func (s Suite) checkMatchesTurn(t *testing.T, turn loomtest.Turn, resp llm.Response) {
	t.Helper()
	var wantText, wantThinking string
	var wantCalls []llm.ToolCall
	for _, p := range turn.Parts {
		switch p := p.(type) {
		case llm.Text:
			wantText += p.Text
		case llm.Thinking:
			wantThinking += p.Text
		case llm.ToolCall:
			wantCalls = append(wantCalls, p)
		}
	}
	if got := resp.Text(); got != wantText {
		t.Errorf("text %q, want %q", got, wantText)
	}
	var gotThinking string
	for _, p := range resp.Message.Parts {
		if th, ok := p.(llm.Thinking); ok {
			gotThinking += th.Text
			if s.Format == loomtest.Anthropic {
				for _, tp := range turn.Parts {
					if want, ok := tp.(llm.Thinking); ok && th.Signature != want.Signature {
						t.Errorf("thinking signature %q, want %q", th.Signature, want.Signature)
					}
				}
			}
		}
	}
	if gotThinking != wantThinking {
		t.Errorf("thinking %q, want %q", gotThinking, wantThinking)
	}
	calls := resp.ToolCalls()
	if len(calls) != len(wantCalls) {
		t.Fatalf("%d tool calls, want %d: %+v", len(calls), len(wantCalls), calls)
	}
	finish := turn.Finish
	if finish == "" {
		finish = llm.FinishStop
		if len(wantCalls) > 0 {
			finish = llm.FinishToolCalls
		}
	}
	for i, c := range calls {
		w := wantCalls[i]
		if c.ID != w.ID || c.Name != w.Name {
			t.Errorf("call %d is %s %s, want %s %s", i, c.ID, c.Name, w.ID, w.Name)
		}
		if w.ArgumentsError() != nil {
			if !c.Malformed {
				t.Errorf("call %d with arguments %q is not marked Malformed", i, w.Arguments)
			}
		} else if !jsonEqual(c.Args(), w.Args()) {
			t.Errorf("call %d arguments %s, want %s", i, c.Args(), w.Args())
		}
		lastCut := finish == llm.FinishLength && i == len(calls)-1
		if c.Incomplete != lastCut {
			t.Errorf("call %d Incomplete = %v, want %v (finish %s)", i, c.Incomplete, lastCut, finish)
		}
	}
	if resp.FinishReason != finish {
		t.Errorf("finish reason %q, want %q", resp.FinishReason, finish)
	}
	u := resp.Usage
	if u.InputTokens != turn.Usage.InputTokens || u.OutputTokens != turn.Usage.OutputTokens || u.CacheReadTokens != turn.Usage.CacheReadTokens {
		t.Errorf("usage %+v, want %+v", u, turn.Usage)
	}
	if resp.Truncated {
		t.Error("a complete answer is marked Truncated")
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

var anthropicID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

func (s Suite) testRoundTrip(t *testing.T) {
	for _, mode := range []string{"blocking", "stream"} {
		t.Run(mode, func(t *testing.T) {
			calls := loomtest.ToolCalls(
				loomtest.Call("call_t1", "read_file", `{"path":"main.go"}`),
				loomtest.Call("call_t2", "list_dir", ``),
				loomtest.Call("call_t3", "grep", `{"pattern":"TODO","path":"."}`),
			).WithUsage(llm.Usage{InputTokens: 300, OutputTokens: 60})
			calls.Chunk = 4
			m, srv := s.start(t, loomtest.Config{Turns: []loomtest.Turn{calls, loomtest.Text("All done.")}}, Setup{})
			call := func(req llm.Request) llm.Response {
				t.Helper()
				var resp llm.Response
				var err error
				if mode == "blocking" {
					resp, err = m.Generate(context.Background(), req)
				} else {
					resp, _, err = StreamCall(context.Background(), m, req)
				}
				if err != nil {
					t.Fatalf("call %d: %v", len(srv.Requests()), err)
				}
				return resp
			}

			// A history that starts with a call from another provider,
			// whose id Anthropic would refuse as it is.
			foreign := "call:abc.1/x"
			req := baseRequest
			req.Temperature = ptr(0.25)
			req.MaxTokens = 512
			req.Messages = []llm.Message{
				llm.UserText("What module is this?"),
				{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: foreign, Name: "read_file", Arguments: `{"path":"go.mod"}`}}},
				{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: foreign, Name: "read_file", Content: "module example.com/x"}}},
				llm.AssistantText("It is example.com/x."),
				llm.UserText("Now read main.go, list the directory and grep for TODO."),
			}
			resp1 := call(req)
			got := resp1.ToolCalls()
			if len(got) != 3 || resp1.FinishReason != llm.FinishToolCalls {
				t.Fatalf("turn 1: %+v", resp1)
			}
			results := llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
				llm.ToolResult{CallID: got[1].ID, Name: got[1].Name, Content: "main.go\ngo.mod"},
				llm.ToolResult{CallID: got[0].ID, Name: got[0].Name, Content: "open main.go: permission denied", IsError: true},
				llm.ToolResult{CallID: got[2].ID, Name: got[2].Name, Content: "main.go:3: // TODO: \"quote\" \\ <tag> \u2028 é"},
				llm.Text{Text: "Carry on."},
			}}
			req.Messages = append(append(req.Messages, resp1.Message), results)
			resp2 := call(req)
			if resp2.Text() != "All done." {
				t.Fatalf("turn 2: %+v", resp2)
			}

			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			for i, r := range reqs {
				if r.Err != nil {
					t.Fatalf("request %d would be refused by the vendor: %v", i+1, r.Err)
				}
				if r.Stream != (mode == "stream") {
					t.Errorf("request %d stream = %v", i+1, r.Stream)
				}
				d := r.Decoded
				if d.System != req.System {
					t.Errorf("request %d: system prompt %q arrived as %q", i+1, req.System, d.System)
				}
				if d.MaxTokens != 512 || d.Temperature == nil || *d.Temperature != 0.25 {
					t.Errorf("request %d: max tokens %d, temperature %v", i+1, d.MaxTokens, d.Temperature)
				}
				if len(d.Tools) != 3 || d.Tools[0].Name != "read_file" || !jsonEqual(d.Tools[0].Schema, baseRequest.Tools[0].Schema) {
					t.Errorf("request %d: tools %+v", i+1, d.Tools)
				}
				if err := llm.CheckHistory(d.Messages); err != nil {
					t.Errorf("request %d: the history the server got breaks pairing: %v", i+1, err)
				}
				if s.Format == loomtest.Anthropic {
					for _, msg := range d.Messages {
						for _, c := range msg.ToolCalls() {
							if !anthropicID.MatchString(c.ID) {
								t.Errorf("request %d: tool-call id %q was sent unsanitized", i+1, c.ID)
							}
						}
					}
				}
			}
			// All results of the turn, in the order given, answer the calls,
			// in the message right after the calls (OpenAI sends the text
			// after them as a message of its own).
			last := reqs[1].Decoded.Messages
			turnAt := -1
			for i, msg := range last {
				if len(msg.ToolCalls()) == 3 {
					turnAt = i
				}
			}
			if turnAt < 0 || turnAt+1 >= len(last) {
				t.Fatalf("request 2 lacks the assistant turn with 3 calls and its results: %+v", last)
			}
			rs := last[turnAt+1].ToolResults()
			if len(rs) != 3 {
				t.Fatalf("the message after the calls holds %d results, want 3: %+v", len(rs), last[turnAt+1])
			}
			for i, want := range results.ToolResults() {
				if rs[i].CallID != want.CallID || !strings.Contains(rs[i].Content, want.Content) {
					t.Errorf("result %d arrived as %+v, want %+v", i, rs[i], want)
				}
				if s.Format == loomtest.Anthropic && rs[i].IsError != want.IsError {
					t.Errorf("result %d is_error = %v, want %v", i, rs[i].IsError, want.IsError)
				}
			}
			if got := lastUserText(last[turnAt+1:]); got != "Carry on." {
				t.Errorf("the text after the results arrived as %q", got)
			}
			if s.GoldenDir != "" {
				for i, r := range reqs {
					golden(t, filepath.Join(s.GoldenDir, fmt.Sprintf("round_trip_%s_%d.json", mode, i+1)), r.Body)
				}
			}
		})
	}
}

func lastUserText(msgs []llm.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.Role == llm.RoleUser {
			b.WriteString(m.Text())
		}
	}
	return b.String()
}

func ptr[T any](v T) *T { return &v }

// golden compares body with the file at path, indented; UPDATE_GOLDEN=1
// writes the file instead.
func golden(t *testing.T, path string, body []byte) {
	t.Helper()
	var got bytes.Buffer
	if err := json.Indent(&got, body, "", "  "); err != nil {
		t.Fatalf("%s: the request body is not JSON: %v\n%s", path, err, body)
	}
	got.WriteByte('\n')
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("%s: the request body differs from the golden file (UPDATE_GOLDEN=1 rewrites it after review)\ngot:\n%s", path, got.Bytes())
	}
}

// fault is an injected failure and the error it must become.
type fault struct {
	name string
	turn loomtest.Turn
	kind model.Kind
	// blockingKind, when set, is the kind for a blocking call.
	blockingKind model.Kind
	retryable    *bool
	check        func(t *testing.T, e *model.Error)
	// partial is the least number of events a stream yields before the
	// error.
	partial int
}

// quotaTurn is the vendor's "no credit left" answer.
func (s Suite) quotaTurn() loomtest.Turn {
	if s.Format == loomtest.Anthropic {
		return loomtest.Turn{Status: 429, Error: &loomtest.APIError{Type: "rate_limit_error", Code: "enforced_spend_limit_reached", Message: "You have reached your specified workspace API usage limits."}}
	}
	return loomtest.Turn{Status: 429, Error: &loomtest.APIError{Type: "insufficient_quota", Code: "insufficient_quota", Message: "You exceeded your current quota, please check your plan and billing details."}}
}

func (s Suite) faults() []fault {
	yes, no := true, false
	quota := s.quotaTurn()
	text := loomtest.Text("Hello there, this is a longer answer.")
	text.Chunk = 6
	toolCut := loomtest.ToolCalls(loomtest.Call("call_9", "read_file", `{"path":"some/long/path/main.go"}`))
	toolCut.Chunk = 4
	retryAfter := func(d time.Duration) func(*testing.T, *model.Error) {
		return func(t *testing.T, e *model.Error) {
			if e.RetryAfter != d {
				t.Errorf("RetryAfter = %v, want %v", e.RetryAfter, d)
			}
		}
	}
	quotes := func(s string) func(*testing.T, *model.Error) {
		return func(t *testing.T, e *model.Error) {
			if !strings.Contains(e.Error(), s) {
				t.Errorf("the error does not quote %q: %v", s, e)
			}
		}
	}
	return []fault{
		{name: "400", turn: loomtest.Status(400, "invalid_request_error", "messages: bad"), kind: model.KindBadRequest, retryable: &no},
		{name: "401", turn: loomtest.Status(401, "", ""), kind: model.KindAuth, retryable: &no},
		{name: "403", turn: loomtest.Status(403, "", ""), kind: model.KindPermission, retryable: &no},
		{name: "404", turn: loomtest.Status(404, "", ""), kind: model.KindNotFound, retryable: &no},
		{name: "413", turn: loomtest.Status(413, "request_too_large", ""), kind: model.KindRequestTooLarge, retryable: &no, check: quotes("compact")},
		{name: "429 retry-after", turn: loomtest.Status(429, "", "").WithHeader("retry-after", "2"), kind: model.KindRateLimited, retryable: &yes, check: retryAfter(2 * time.Second)},
		{name: "429 retry-after-ms wins", turn: loomtest.Status(429, "", "").WithHeader("retry-after", "30").WithHeader("retry-after-ms", "1500"), kind: model.KindRateLimited, check: retryAfter(1500 * time.Millisecond)},
		{name: "429 quota", turn: quota, kind: model.KindQuota, retryable: &no},
		{name: "500", turn: loomtest.Status(500, "", ""), kind: model.KindServer, retryable: &yes, check: func(t *testing.T, e *model.Error) {
			if e.Status != 500 || e.RequestID == "" || len(e.Raw) == 0 {
				t.Errorf("status %d, request id %q, raw %q", e.Status, e.RequestID, e.Raw)
			}
		}},
		{name: "500 should-retry false", turn: loomtest.Status(500, "", "").WithHeader("x-should-retry", "false"), kind: model.KindServer, retryable: &no},
		{name: "400 should-retry true", turn: loomtest.Status(400, "", "").WithHeader("x-should-retry", "true"), kind: model.KindBadRequest, retryable: &yes},
		{name: "529", turn: loomtest.Status(529, "overloaded_error", "Overloaded"), kind: model.KindOverloaded, retryable: &yes},
		{name: "502 HTML", turn: loomtest.HTMLPage(502), kind: model.KindServer, check: quotes("Bad Gateway")},
		{name: "200 HTML", turn: loomtest.HTMLPage(200), kind: model.KindInvalidResponse, check: quotes("Bad Gateway")},
		{name: "200 not JSON", turn: loomtest.Turn{Body: `{"id": "x", "choi`, ContentType: "application/json"}, kind: model.KindInvalidResponse},
		{name: "error event overloaded first", turn: loomtest.ErrorEvent("overloaded_error", "Overloaded", 1), kind: model.KindOverloaded, retryable: &yes, check: func(t *testing.T, e *model.Error) {
			if e.Type != "overloaded_error" {
				t.Errorf("Type = %q", e.Type)
			}
		}},
		{name: "error event overloaded after text", turn: func() loomtest.Turn {
			t := text
			t.Error, t.ErrorAfter = &loomtest.APIError{Type: "overloaded_error", Message: "Overloaded"}, 5
			return t
		}(), kind: model.KindOverloaded, partial: 1},
		{name: "error event api_error", turn: loomtest.ErrorEvent("api_error", "Internal server error", 2), kind: model.KindServer},
		{name: "error event rate limit", turn: loomtest.ErrorEvent("rate_limit_error", "slow down", 1), kind: model.KindRateLimited},
		{name: "cut mid tool call", turn: toolCut.CutAt(4, loomtest.CutEnd), kind: model.KindTruncatedStream, blockingKind: model.KindInvalidResponse, retryable: &yes, partial: 1},
		{name: "cut before any event", turn: text.CutAt(0, loomtest.CutEnd), kind: model.KindTruncatedStream, blockingKind: model.KindInvalidResponse},
		{name: "connection broken mid stream", turn: text.CutAt(3, loomtest.CutAbort), kind: model.KindTruncatedStream, blockingKind: model.KindNetwork, retryable: &yes},
		{name: "reset before headers", turn: loomtest.Turn{Reset: true}, kind: model.KindNetwork, retryable: &yes},
	}
}

func (s Suite) testFaults(t *testing.T) {
	for _, f := range s.faults() {
		for _, mode := range []string{"blocking", "stream"} {
			t.Run(f.name+"/"+mode, func(t *testing.T) {
				m, srv := s.start(t, loomtest.Config{Turns: []loomtest.Turn{f.turn}}, Setup{})
				var err error
				var evs []llm.Event
				var resp llm.Response
				want := f.kind
				if mode == "blocking" {
					resp, err = m.Generate(context.Background(), baseRequest)
					if f.blockingKind != "" {
						want = f.blockingKind
					}
				} else {
					resp, evs, err = StreamCall(context.Background(), m, baseRequest)
				}
				var e *model.Error
				if !errors.As(err, &e) {
					t.Fatalf("err = %v (%T), want a *model.Error of kind %s", err, err, want)
				}
				if e.Kind != want {
					t.Fatalf("kind %s, want %s: %v", e.Kind, want, err)
				}
				if f.retryable != nil && want == f.kind && model.IsRetryable(err) != *f.retryable {
					t.Errorf("IsRetryable = %v, want %v", !*f.retryable, *f.retryable)
				}
				if f.check != nil {
					f.check(t, e)
				}
				if mode == "stream" {
					if len(evs) < f.partial {
						t.Errorf("%d events before the error, want at least %d", len(evs), f.partial)
					}
					for _, ev := range evs {
						if _, ok := ev.(llm.Finish); ok {
							t.Errorf("a failed stream yielded a Finish")
						}
					}
					if !resp.Truncated {
						t.Error("the fold of a failed stream is not Truncated")
					}
					for _, c := range resp.ToolCalls() {
						if !c.Incomplete {
							t.Errorf("call %s of a failed stream is not Incomplete", c.ID)
						}
					}
				}
				if n := len(srv.Requests()); n != 1 {
					t.Errorf("%d requests for one call; the adapter itself must not retry", n)
				}
			})
		}
	}
}

func (s Suite) testTimeouts(t *testing.T) {
	type tc struct {
		name  string
		turn  loomtest.Turn
		setup Setup
		mode  string
		limit time.Duration
	}
	for _, c := range []tc{
		{name: "stream silent after a ping", turn: loomtest.Turn{Parts: []llm.Part{llm.Text{Text: "x"}}, Pings: 1, Cut: loomtest.CutSilence, CutAfter: 2}, mode: "stream", limit: 90 * time.Second},
		{name: "stream without headers", turn: loomtest.Turn{HeaderDelay: time.Hour}, mode: "stream", limit: 90 * time.Second},
		{name: "stream that only pings", turn: loomtest.Turn{Cut: loomtest.CutSilence, CutAfter: 1, PingEvery: 10 * time.Second}, setup: Setup{Timeout: 2 * time.Minute}, mode: "stream", limit: 2 * time.Minute},
		{name: "blocking without headers", turn: loomtest.Turn{HeaderDelay: time.Hour}, setup: Setup{Timeout: 30 * time.Second}, mode: "blocking", limit: 30 * time.Second},
		{name: "blocking silent after headers", turn: loomtest.Text("x").CutAt(0, loomtest.CutSilence), setup: Setup{Timeout: 30 * time.Second}, mode: "blocking", limit: 30 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, _ := s.startPipe(t, loomtest.Config{Turns: []loomtest.Turn{c.turn}}, c.setup)
				start := time.Now()
				var err error
				if c.mode == "blocking" {
					_, err = m.Generate(context.Background(), baseRequest)
				} else {
					_, _, err = StreamCall(context.Background(), m, baseRequest)
				}
				elapsed := time.Since(start)
				if model.KindOf(err) != model.KindTimeout || !model.IsRetryable(err) {
					t.Fatalf("err = %v, want a retryable timeout", err)
				}
				if elapsed > c.limit || elapsed == 0 {
					t.Errorf("gave up after %v, want within %v", elapsed, c.limit)
				}
			})
		})
	}
}

func (s Suite) testCancel(t *testing.T) {
	t.Run("stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			turn := loomtest.Text("partial answer").CutAt(3, loomtest.CutSilence)
			turn.Chunk = 4
			m, _ := s.startPipe(t, loomtest.Config{Turns: []loomtest.Turn{turn}}, Setup{})
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(5*time.Second, cancel)
			start := time.Now()
			_, _, err := StreamCall(ctx, m, baseRequest)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if model.IsRetryable(err) {
				t.Error("a cancelled call must not be retried")
			}
			if d := time.Since(start); d != 5*time.Second {
				t.Errorf("returned %v after the start, want at the cancel (5s)", d)
			}
		})
	})
	t.Run("blocking", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, _ := s.startPipe(t, loomtest.Config{Turns: []loomtest.Turn{{HeaderDelay: time.Hour}}}, Setup{})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err := m.Generate(ctx, baseRequest)
			if !errors.Is(err, context.DeadlineExceeded) && model.KindOf(err) != model.KindTimeout {
				t.Fatalf("err = %v, want the context's deadline", err)
			}
		})
	})
	t.Run("during retry backoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := &attempts{turns: []loomtest.Turn{loomtest.Status(529, "overloaded_error", "Overloaded")}}
			inner, _ := s.startPipe(t, loomtest.Config{Func: a.turn}, Setup{})
			m := model.Retry(model.RetryPolicy{BaseDelay: 10 * time.Second})(inner)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			start := time.Now()
			_, err := m.Generate(ctx, baseRequest)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if d := time.Since(start); d != time.Second {
				t.Errorf("returned %v after the start, want at the cancel (1s)", d)
			}
			if len(a.at) != 1 {
				t.Errorf("%d requests; none may follow a cancel", len(a.at))
			}
		})
	})
	t.Run("break", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			turn := loomtest.Text("a b c d e f g h").CutAt(4, loomtest.CutSilence)
			turn.Chunk = 2
			m, srv := s.startPipe(t, loomtest.Config{Turns: []loomtest.Turn{turn}}, Setup{})
			n := 0
			for e, err := range m.Stream(context.Background(), baseRequest) {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := e.(llm.TextDelta); ok {
					n++
					break
				}
			}
			if n != 1 {
				t.Fatalf("got %d text events", n)
			}
			// Breaking must release the connection: the server sees the
			// client go and its handler returns.
			synctest.Wait()
			if n := srv.Active(); n != 0 {
				t.Fatalf("%d requests still being served after the consumer broke out", n)
			}
		})
	})
}

func (s Suite) testSingleUse(t *testing.T) {
	m, srv := s.start(t, loomtest.Config{Repeat: true, Turns: []loomtest.Turn{loomtest.Text("once")}}, Setup{})
	seq := m.Stream(context.Background(), baseRequest)
	for _, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	var last error
	for e, err := range seq {
		n++
		if e != nil {
			t.Fatalf("a second range yielded %v", e)
		}
		last = err
	}
	if n != 1 || last == nil {
		t.Fatalf("a second range yielded %d elements, last error %v; want one error", n, last)
	}
	if len(srv.Requests()) != 1 {
		t.Fatalf("a second range sent a request")
	}
}

// attempts records when each request arrived and its body and attempt
// header, and answers with the script in order.
type attempts struct {
	mu    sync.Mutex
	turns []loomtest.Turn
	at    []time.Time
	body  [][]byte
	count []string
}

func (a *attempts) turn(r *loomtest.Request) loomtest.Turn {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at = append(a.at, time.Now())
	a.body = append(a.body, r.Body)
	a.count = append(a.count, r.Header.Get("X-Stainless-Retry-Count"))
	i := min(len(a.at)-1, len(a.turns)-1)
	return a.turns[i]
}

// backoffBetween checks that the retry came after a wait in [lo, hi].
func backoffBetween(lo, hi time.Duration) func(*testing.T, *attempts, time.Time, error) {
	return func(t *testing.T, a *attempts, _ time.Time, _ error) {
		if d := a.at[1].Sub(a.at[0]); d < lo || d > hi {
			t.Errorf("retried after %v, want between %v and %v", d, lo, hi)
		}
	}
}

func (s Suite) testRetry(t *testing.T) {
	overloaded := loomtest.Status(529, "overloaded_error", "Overloaded")
	answer := loomtest.Text("finally")
	answer.Chunk = 3
	afterText := loomtest.Text("visible text first")
	afterText.Chunk = 4
	afterText.Error, afterText.ErrorAfter = &loomtest.APIError{Type: "overloaded_error", Message: "Overloaded"}, 4
	cases := []struct {
		name     string
		turns    []loomtest.Turn
		policy   model.RetryPolicy
		modes    []string
		requests int
		kind     model.Kind // "" means success
		check    func(t *testing.T, a *attempts, start time.Time, err error)
	}{
		{name: "529 twice then success", turns: []loomtest.Turn{overloaded, overloaded, answer}, requests: 3,
			check: func(t *testing.T, a *attempts, _ time.Time, _ error) {
				if strings.Join(a.count, ",") != "0,1,2" {
					t.Errorf("attempt headers %q, want 0,1,2", a.count)
				}
			}},
		{name: "529 forever", turns: []loomtest.Turn{overloaded}, policy: model.RetryPolicy{MaxRetries: 2}, requests: 3, kind: model.KindOverloaded},
		{name: "429 retry-after 2", turns: []loomtest.Turn{loomtest.Status(429, "", "").WithHeader("retry-after", "2"), answer}, requests: 2,
			check: func(t *testing.T, a *attempts, _ time.Time, _ error) {
				if d := a.at[1].Sub(a.at[0]); d < 2*time.Second || d > 2*time.Second+time.Millisecond {
					t.Errorf("retried after %v, want 2s", d)
				}
			}},
		{name: "429 retry-after-ms wins", turns: []loomtest.Turn{loomtest.Status(429, "", "").WithHeader("retry-after", "30").WithHeader("retry-after-ms", "1500"), answer}, requests: 2,
			check: func(t *testing.T, a *attempts, _ time.Time, _ error) {
				if d := a.at[1].Sub(a.at[0]); d != 1500*time.Millisecond {
					t.Errorf("retried after %v, want 1.5s", d)
				}
			}},
		{name: "429 retry-after an hour fails fast", turns: []loomtest.Turn{loomtest.Status(429, "", "").WithHeader("retry-after", "3600"), answer}, requests: 1, kind: model.KindRateLimited,
			check: func(t *testing.T, _ *attempts, start time.Time, err error) {
				var e *model.Error
				if errors.As(err, &e) && e.RetryAfter != time.Hour {
					t.Errorf("RetryAfter = %v, want 1h", e.RetryAfter)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("failed after %v, want at once", d)
				}
			}},
		{name: "429 retry-after in the past", turns: []loomtest.Turn{loomtest.Status(429, "", "").WithHeader("retry-after", "Fri, 31 Dec 1999 23:59:00 GMT"), answer}, requests: 2, // before the fake clock of synctest (2000-01-01) and the real one
			check: backoffBetween(0, 500*time.Millisecond)},
		{name: "429 retry-after negative", turns: []loomtest.Turn{loomtest.Status(429, "", "").WithHeader("retry-after", "-5"), answer}, requests: 2,
			check: backoffBetween(375*time.Millisecond, 500*time.Millisecond)},
		{name: "429 retry-after NaN", turns: []loomtest.Turn{loomtest.Status(429, "", "").WithHeader("retry-after", "NaN"), answer}, requests: 2,
			check: backoffBetween(375*time.Millisecond, 500*time.Millisecond)},
		{name: "429 retry-after garbage", turns: []loomtest.Turn{loomtest.Status(429, "", "").WithHeader("retry-after", "abc").WithHeader("retry-after-ms", "inf"), answer}, requests: 2,
			check: backoffBetween(375*time.Millisecond, 500*time.Millisecond)},
		{name: "401 once", turns: []loomtest.Turn{loomtest.Status(401, "", ""), answer}, requests: 1, kind: model.KindAuth},
		{name: "400 once", turns: []loomtest.Turn{loomtest.Status(400, "", ""), answer}, requests: 1, kind: model.KindBadRequest},
		{name: "403 once", turns: []loomtest.Turn{loomtest.Status(403, "", ""), answer}, requests: 1, kind: model.KindPermission},
		{name: "404 once", turns: []loomtest.Turn{loomtest.Status(404, "", ""), answer}, requests: 1, kind: model.KindNotFound},
		{name: "413 once", turns: []loomtest.Turn{loomtest.Status(413, "", ""), answer}, requests: 1, kind: model.KindRequestTooLarge},
		{name: "quota once", turns: []loomtest.Turn{s.quotaTurn(), answer}, requests: 1, kind: model.KindQuota},
		{name: "500 should-retry false", turns: []loomtest.Turn{loomtest.Status(500, "", "").WithHeader("x-should-retry", "false"), answer}, requests: 1, kind: model.KindServer},
		{name: "400 should-retry true", turns: []loomtest.Turn{loomtest.Status(400, "", "").WithHeader("x-should-retry", "true"), answer}, requests: 2},
		{name: "408 retried", turns: []loomtest.Turn{loomtest.Status(408, "", ""), answer}, requests: 2},
		{name: "409 retried", turns: []loomtest.Turn{loomtest.Status(409, "", ""), answer}, requests: 2},
		{name: "reset retried with the same body", turns: []loomtest.Turn{{Reset: true}, answer}, requests: 2},
		{name: "error event before output retried", turns: []loomtest.Turn{loomtest.ErrorEvent("overloaded_error", "Overloaded", 1), answer}, modes: []string{"stream"}, requests: 2},
		{name: "error event after output surfaces", turns: []loomtest.Turn{afterText, answer}, modes: []string{"stream"}, requests: 1, kind: model.KindOverloaded},
		{name: "cut stream before output retried", turns: []loomtest.Turn{answer.CutAt(1, loomtest.CutEnd), answer}, modes: []string{"stream"}, requests: 2},
	}
	for _, c := range cases {
		modes := c.modes
		if modes == nil {
			modes = []string{"blocking", "stream"}
		}
		for _, mode := range modes {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					a := &attempts{turns: c.turns}
					inner, _ := s.startPipe(t, loomtest.Config{Func: a.turn}, Setup{})
					m := model.Retry(c.policy)(inner)
					start := time.Now()
					var err error
					var resp llm.Response
					if mode == "blocking" {
						resp, err = m.Generate(context.Background(), baseRequest)
					} else {
						resp, _, err = StreamCall(context.Background(), m, baseRequest)
					}
					if c.kind == "" {
						if err != nil || resp.Text() != "finally" {
							t.Fatalf("resp %q, err %v; want success", resp.Text(), err)
						}
					} else if model.KindOf(err) != c.kind {
						t.Fatalf("err = %v, want kind %s", err, c.kind)
					}
					if len(a.at) != c.requests {
						t.Fatalf("%d requests, want %d", len(a.at), c.requests)
					}
					for i := 1; i < len(a.body); i++ {
						if !bytes.Equal(a.body[i], a.body[0]) {
							t.Errorf("attempt %d sent a different body", i+1)
						}
					}
					if c.check != nil {
						c.check(t, a, start, err)
					}
				})
			})
		}
	}
}
