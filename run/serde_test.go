package run_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
)

// SEMANTICS §8: a run serialized and restored at every step gives the same
// Done as a run driven straight through, over repairs, retries, approvals,
// denials, malformed arguments and id minting.
func TestRoundTripAtEveryStepOfAScriptedRun(t *testing.T) {
	cfg := run.Config{
		System: "sys", Prompt: prompt("tidy the repo"),
		Input: []llm.Message{prompt("hi"), llm.AssistantText("hello")},
		Tools: []llm.ToolSpec{search(), remove, add}, MaxTurns: run.Turns(6), MaxInvalidRetries: 1,
	}
	model := func(cm run.CallModel) (llm.Response, error) {
		var resp llm.Response
		switch cm.Turn {
		case 1:
			resp = runtest.Answer(llm.Thinking{Text: "plan", Signature: "s1"}, runtest.Call("", "Search", `{"q":"tmp"}`), runtest.Call("", "add", ``))
		case 2:
			resp = runtest.Answer(runtest.Call("a", "delete_file", `{"path":"x"}`), runtest.Call("a", "delete_file", `{"path":"y"}`), runtest.Call("b", "add", `{"a":`))
		case 3:
			resp = runtest.Answer(llm.Text{Text: "oops"}, runtest.Call("c", "frobnicate", `{}`), runtest.Call("d", "search", `{}`))
		case 4:
			resp = runtest.Answer(runtest.Call("e", "search", `{"q":"more"}`))
			resp.FinishReason = llm.FinishLength
		default:
			resp = runtest.Answer(llm.Text{Text: "All tidy."})
		}
		resp.Usage = llm.Usage{InputTokens: int64(100 * cm.Turn), OutputTokens: int64(cm.Turn)}
		resp.ID, resp.Raw = "resp", json.RawMessage(`{"turn":true}`)
		return resp, nil
	}
	resolve := func(rc run.ResolveToolCall) run.Resolution {
		if rc.Suggestion != "" {
			return run.Repair{Name: rc.Suggestion}
		}
		return run.Retry{Feedback: "no such tool"}
	}
	approve := func(at run.ApproveTools) []run.Decision {
		return []run.Decision{
			{CallID: at.Calls[0].Call.ID, Action: run.Edited, Arguments: `{"path":"x2"}`},
			{CallID: at.Calls[1].Call.ID, Action: run.Denied, Reason: "keep y"},
		}
	}
	tool := func(c run.PendingCall) llm.ToolResult {
		return llm.ToolResult{Content: c.Call.Name + " " + c.Call.Arguments}
	}
	d := runtest.Driver{Model: checkRequests(t, model), Tool: tool, Resolve: resolve, Approve: approve}
	straight, _, err := d.Drive(run.New(cfg))
	if err != nil {
		t.Fatal(err)
	}
	saves := 0
	d.Save = func(r *run.Run) (*run.Run, error) { saves++; return runtest.RoundTrip(r) }
	restored, _, err := d.Drive(run.New(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(straight, restored) {
		t.Fatalf("restored run differs:\n%s\n%s", mustJSON(t, straight), mustJSON(t, restored))
	}
	if saves < 20 || straight.Output != "All tidy." || len(straight.Calls) != 5 || straight.Usage.InputTokens != 1500 {
		t.Fatalf("saves %d, response %s", saves, mustJSON(t, straight))
	}
	if err := llm.CheckHistory(straight.Messages); err != nil {
		t.Fatal(err)
	}
}

// Rig: serde_round_trip_at_exhausted_budget_preserves_boundary.
func TestRoundTripAtExhaustedBudget(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(1)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "add", `{}`))
	s.CallTools()
	s.Results(runtest.Result("c1", "1"))
	nr, err := runtest.RoundTrip(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nr.Next(); !errors.Is(err, run.ErrMaxTurns) {
		t.Fatalf("err = %v", err)
	}
}

// Rig: pending_invalid_tool_call_survives_serde_round_trip and
// serialized_run_alone_carries_pending_tool_calls.
func TestPendingStepsSurviveRoundTrip(t *testing.T) {
	for _, state := range []string{run.StateResolvingToolCalls, run.StateAwaitingApproval, run.StateExecutingTools, run.StateAwaitingAdvance, run.StateDone} {
		r := runIn(t, state)
		want, err1 := r.Next()
		nr, err := runtest.RoundTrip(runIn(t, state))
		if err != nil {
			t.Fatal(err)
		}
		got, err2 := nr.Next()
		if err1 != nil || err2 != nil || !reflect.DeepEqual(runtest.Describe(want), runtest.Describe(got)) || mustJSON(t, want) != mustJSON(t, got) {
			t.Fatalf("%s: %s / %s (%v %v)", state, runtest.Describe(want), runtest.Describe(got), err1, err2)
		}
	}
}

// Rig: model_turn_raw_* and recorded_raw_survives_serde_round_trip.
func TestCallRecordsKeepIdentityAndRaw(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x")})
	s := runtest.New(t, r)
	s.CallModel()
	resp := runtest.Answer(llm.Text{Text: "a"})
	resp.ID, resp.Model, resp.RequestID, resp.Raw = "msg_1", "m-2", "req_9", json.RawMessage(`{"raw":[1,2]}`)
	resp.Usage = llm.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5}
	s.Reply(resp)
	want := run.CallRecord{Index: 0, Turn: 1, Usage: resp.Usage, FinishReason: llm.FinishStop, ID: "msg_1", Model: "m-2", RequestID: "req_9", Raw: resp.Raw}
	if got := r.Calls()[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("record %+v", got)
	}
	nr, err := runtest.RoundTrip(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := nr.Calls()[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("restored record %+v", got)
	}
}

// The usage of every call, retried turns included, is summed (SEMANTICS §6).
func TestUsageIncludesRetriedTurns(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(3), MaxInvalidRetries: 1})
	s := runtest.New(t, r)
	s.CallModel()
	a := runtest.Answer(runtest.Call("c1", "nope", `{}`))
	a.Usage = llm.Usage{InputTokens: 10, OutputTokens: 1}
	s.Reply(a)
	s.ResolveToolCall()
	s.Resolve(run.Retry{})
	s.CallModel()
	b := runtest.Answer(llm.Text{Text: "fine"})
	b.Usage = llm.Usage{InputTokens: 20, OutputTokens: 2}
	s.Reply(b)
	done := s.Done()
	if done.Usage != (llm.Usage{InputTokens: 30, OutputTokens: 3}) || len(done.Calls) != 2 {
		t.Fatalf("done %+v", done)
	}
}

// Rig: concurrent_runs_of_same_agent_have_independent_retry_budgets.
func TestRunsShareNothing(t *testing.T) {
	cfg := run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(3), MaxInvalidRetries: 1}
	for range 2 {
		r := run.New(cfg)
		s := runtest.New(t, r)
		s.CallModel()
		s.ReplyCalls(runtest.Call("c1", "nope", `{}`))
		s.ResolveToolCall()
		s.Resolve(run.Retry{}) // each run has its own retry
	}
}
