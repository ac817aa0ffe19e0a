package agent_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/anthropic"
	"github.com/loomkit/loom/model/openai"
	"github.com/loomkit/loom/run"
)

// adapters returns a model of each wire format pointed at srv.
func adapters(srv *loomtest.Server) map[string]model.Model {
	return map[string]model.Model{
		"openai":    openai.New(openai.Config{BaseURL: srv.OpenAIURL(), APIKey: "k", Model: "gpt-4o-mini"}),
		"anthropic": anthropic.New(anthropic.Config{BaseURL: srv.AnthropicURL(), APIKey: "k", Model: "claude-haiku-4-5"}),
	}
}

func e2eScript() []loomtest.Turn {
	read := loomtest.Call("call_1", "read_file", `{"path":"a.go"}`)
	write := loomtest.Call("call_2", "write_file", `{"path":".git/config"}`)
	bogus := loomtest.Call("call_3", "Read_File", `{"path":"b.go"}`)
	t1 := loomtest.ToolCalls(read, write)
	t1.Usage = llm.Usage{InputTokens: 20, OutputTokens: 8}
	t2 := loomtest.ToolCalls(bogus)
	t2.Chunk = 3
	t3 := loomtest.Text("The files are read.")
	t3.Chunk = 4
	t3.Usage = llm.Usage{InputTokens: 40, OutputTokens: 6}
	return []loomtest.Turn{t1, loomtest.Status(529, "overloaded_error", "Overloaded"), t2, t3}
}

// A multi-tool run over real HTTP in both wire formats, blocking and
// streaming: an approval, a repaired tool name, a retried 529, and the
// same outcome every way.
func TestEndToEndOverHTTP(t *testing.T) {
	var outcomes []string
	for _, format := range []string{"openai", "anthropic"} {
		for _, mode := range []string{"run", "stream"} {
			t.Run(format+"/"+mode, func(t *testing.T) {
				srv := loomtest.Start(loomtest.Config{Turns: e2eScript()})
				defer srv.Close()
				var wrote []string
				readFile := &probe{name: "read_file", effect: llm.EffectReadOnly}
				readFile.onCall = func(ctx context.Context, text string) (llm.ToolResult, error) {
					return llm.ToolResult{Content: "package a"}, nil
				}
				cfg := agent.Config{
					Model:    adapters(srv)[format],
					System:   "You read files.",
					Tools:    set(t, readFile, writeTool(&wrote)),
					Approver: agent.DenyAll("never touch .git"),
					Retry:    model.RetryPolicy{BaseDelay: time.Millisecond},
					NewID:    func() string { return "run_e2e" },
				}
				a := agent.New(cfg)
				var res agent.Result
				var evs []agent.Event
				var err error
				if mode == "run" {
					res, evs, err = runCollect(t, a, agent.Prompt("read a.go"))
				} else {
					res, evs, err = streamCollect(t, a, agent.Prompt("read a.go"))
				}
				if err != nil {
					t.Fatal(err)
				}
				if res.Output != "The files are read." || len(res.Calls) != 3 {
					t.Fatalf("res = %+v", res)
				}
				if err := llm.CheckHistory(res.Messages); err != nil {
					t.Fatal(err)
				}
				rs := allResults(res.Messages)
				if rs[0].Content != "package a" || rs[1].Content != "Tool call denied: never touch .git" || rs[2].Content != "package a" || len(wrote) != 0 {
					t.Fatalf("results = %+v, wrote %v", rs, wrote)
				}
				for _, r := range srv.Requests() {
					if r.Err != nil {
						t.Fatalf("the server refused request %d: %v", r.Seq, r.Err)
					}
					if r.Stream != (mode == "stream") {
						t.Fatalf("request %d stream=%v in mode %s", r.Seq, r.Stream, mode)
					}
				}
				if got := len(srv.Requests()); got != 4 {
					t.Fatalf("%d requests, want 4 (one retried)", got)
				}
				if r := eventsOf[agent.Retrying](evs); len(r) != 1 || model.KindOf(r[0].Err) != model.KindOverloaded {
					t.Fatalf("retrying events = %+v", r)
				}
				if text(evs) != "The files are read." {
					t.Fatalf("text = %q", text(evs))
				}
				if mode == "stream" && len(eventsOf[agent.TextDelta](evs)) < 3 {
					t.Fatalf("stream gave %d text deltas, want chunks", len(eventsOf[agent.TextDelta](evs)))
				}
				b, _ := json.Marshal(res.Messages)
				// The adapters name their operation in errors ("messages
				// stream"); the rest must be identical.
				got := strings.ReplaceAll(strings.Join(describe(t, evs[1:len(evs)-1]), "\n"), " stream: ", ": ")
				outcomes = append(outcomes, format+": "+got+"\n"+string(b))
			})
		}
	}
	// Run and Stream agree, per format.
	for i := 0; i+1 < len(outcomes); i += 2 {
		if outcomes[i] != outcomes[i+1] {
			t.Errorf("run and stream differ:\n%s\n---\n%s", outcomes[i], outcomes[i+1])
		}
	}
}

// A stream cut in the middle of a tool call is never executed: the turn
// is restarted over HTTP, and the tool runs once.
func TestEndToEndCutStreamRestartsTheTurn(t *testing.T) {
	for _, format := range []string{"openai", "anthropic"} {
		t.Run(format, func(t *testing.T) {
			calls := loomtest.ToolCalls(loomtest.Call("call_1", "add", `{"a":1,"b":2}`))
			calls.Chunk = 2
			srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{
				calls.CutAt(6, loomtest.CutAbort),
				calls,
				loomtest.Text("3"),
			}})
			defer srv.Close()
			var added int
			add := &probe{name: "add", effect: llm.EffectReadOnly}
			add.onCall = func(context.Context, string) (llm.ToolResult, error) {
				added++
				return llm.ToolResult{Content: "3"}, nil
			}
			a := agent.New(agent.Config{Model: adapters(srv)[format], Tools: set(t, add), Retry: model.RetryPolicy{BaseDelay: time.Millisecond}})
			res, evs, err := streamCollect(t, a, agent.Prompt("1+2"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Output != "3" || added != 1 {
				t.Fatalf("output %q, tool ran %d times", res.Output, added)
			}
			restarts := eventsOf[agent.TurnRestarted](evs)
			retries := eventsOf[agent.Retrying](evs)
			if len(restarts)+len(retries) != 1 {
				t.Fatalf("events: %s", types(evs))
			}
			if tc := eventsOf[agent.ToolCall](evs); len(tc) != 1 || !reflect.DeepEqual(json.RawMessage(tc[0].Call.Arguments), json.RawMessage(`{"a":1,"b":2}`)) {
				t.Fatalf("tool calls = %+v", tc)
			}
			if len(res.Calls) != 2 {
				t.Fatalf("%d calls recorded; the cut one must not be", len(res.Calls))
			}
		})
	}
}

// The history sent after tools is always valid: loomtest refuses a
// request with an unanswered call like the vendors do.
func TestEndToEndInterruptedCallsKeepHistoryValid(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{
		loomtest.ToolCalls(loomtest.Call("call_1", "slow", `{"text":"x"}`), loomtest.Call("call_2", "slow", `{"text":"y"}`)),
		loomtest.Text("after the interruption"),
	}})
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	slow := &probe{name: "slow", effect: llm.EffectReadOnly}
	slow.onCall = func(c context.Context, text string) (llm.ToolResult, error) {
		cancel()
		<-c.Done()
		return llm.ToolResult{Content: "late"}, nil
	}
	a := agent.New(agent.Config{Model: adapters(srv)["anthropic"], Tools: set(t, slow), ToolConcurrency: 1})
	_, err := a.Run(ctx, agent.Prompt("go"))
	re := mustAs[*agent.RunError](t, err)
	res, err := a.Resume(context.Background(), agent.Resumption{Snapshot: re.Snapshot})
	if err != nil {
		t.Fatal(err)
	}
	rs := lastResults(res.Messages)
	if rs[0].Content != agent.Interrupted || rs[1].Content != agent.NotStarted {
		t.Fatalf("results = %+v", rs)
	}
	if last := srv.LastRequest(); last.Err != nil {
		t.Fatalf("the server refused the request: %v", last.Err)
	}
	_ = run.NotExecuted
}

// RunAs over real HTTP in both wire formats: the schema inferred from the
// type reaches the server natively (Anthropic's output_config.format,
// OpenAI's response_format with its name) in every request, including the
// re-prompt after an answer that misses a required field, and the typed
// value comes back.
func TestEndToEndOutputSchema(t *testing.T) {
	want, err := jsonschema.For[weather](nil)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(want)
	for _, format := range []string{"openai", "anthropic"} {
		t.Run(format, func(t *testing.T) {
			srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{
				loomtest.Text(`{"city":"Oslo"}`),
				loomtest.Text(`{"city":"Oslo","celsius":4.5}`),
			}})
			defer srv.Close()
			a := agent.New(agent.Config{Model: adapters(srv)[format], Retry: model.RetryPolicy{BaseDelay: time.Millisecond}})
			v, res, err := agent.RunAs[weather](context.Background(), a, agent.Prompt("Weather in Oslo?"))
			if err != nil {
				t.Fatal(err)
			}
			if v != (weather{City: "Oslo", Celsius: 4.5}) || res.Output != `{"city":"Oslo","celsius":4.5}` {
				t.Fatalf("value %+v, output %q", v, res.Output)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2 (one re-prompt)", len(reqs))
			}
			wantName := "output"
			if format == "anthropic" {
				wantName = "" // Anthropic names no schema
			}
			for _, r := range reqs {
				if r.Err != nil {
					t.Fatalf("the server refused request %d: %v", r.Seq, r.Err)
				}
				s := r.Decoded.Schema
				if s == nil {
					t.Fatalf("request %d carried no output schema: %s", r.Seq, r.Body)
				}
				var got, exp any
				if err := json.Unmarshal(s.Schema, &got); err != nil {
					t.Fatal(err)
				}
				json.Unmarshal(wantJSON, &exp)
				if s.Name != wantName || !reflect.DeepEqual(got, exp) {
					t.Fatalf("request %d: schema %q %s, want %q %s", r.Seq, s.Name, s.Schema, wantName, wantJSON)
				}
			}
			if fb := reqs[1].Decoded.Messages[len(reqs[1].Decoded.Messages)-1].Text(); !strings.Contains(fb, "celsius") {
				t.Fatalf("the re-prompt does not name the missing field: %q", fb)
			}
		})
	}
}
