package run_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
)

// SEMANTICS §1: CallModel carries the whole request.
func TestCallModelCarriesTheWholeRequest(t *testing.T) {
	temp, topP := 0.2, 0.9
	input := []llm.Message{prompt("earlier"), llm.AssistantText("hello")}
	cfg := run.Config{
		Model: "m1", System: "be brief", Input: input, Prompt: prompt("now"),
		Tools: []llm.ToolSpec{add}, ToolChoice: llm.ToolChoice{Mode: llm.ToolRequired},
		MaxTokens: 100, Temperature: &temp, TopP: &topP, Stop: []string{"END"},
		Schema: &llm.OutputShape{Name: "out", Schema: json.RawMessage(`{"type":"object"}`)},
	}
	r := run.New(cfg)
	cm := runtest.New(t, r).CallModel()
	want := llm.Request{
		Model: "m1", System: "be brief", Messages: append(append([]llm.Message(nil), input...), prompt("now")),
		Tools: []llm.ToolSpec{add}, ToolChoice: llm.ToolChoice{Mode: llm.ToolRequired},
		MaxTokens: 100, Temperature: &temp, TopP: &topP, Stop: []string{"END"}, Schema: cfg.Schema,
	}
	if !reflect.DeepEqual(cm.Request, want) || cm.Turn != 1 {
		t.Fatalf("request\n got %+v\nwant %+v", cm.Request, want)
	}
	// The run's messages exclude the input (Rig: input_history_prefixes_request_history).
	if len(r.Messages()) != 1 || len(r.History()) != 3 {
		t.Fatalf("messages %d history %d", len(r.Messages()), len(r.History()))
	}
	// The run copied the input slice.
	input[0] = prompt("changed")
	if r.History()[0].Text() != "earlier" {
		t.Fatal("run shares the caller's Input slice")
	}
}

// The request's messages are a capped prefix: appending to them never
// writes into the run.
func TestRequestMessagesAreCapped(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	cm := s.CallModel()
	if cap(cm.Request.Messages) != len(cm.Request.Messages) {
		t.Fatalf("cap %d len %d", cap(cm.Request.Messages), len(cm.Request.Messages))
	}
	_ = append(cm.Request.Messages, prompt("injected"))
	s.ReplyCalls(runtest.Call("c1", "add", `{}`))
	s.CallTools()
	s.Results(runtest.Result("c1", "1"))
	cm2 := s.CallModel()
	if cm2.Request.Messages[1].Role != llm.RoleAssistant {
		t.Fatal("an append to an old request leaked into history")
	}
	if cm.Request.Messages[0].Text() != "x" || len(cm.Request.Messages) != 1 {
		t.Fatal("an old request changed")
	}
}

// SEMANTICS §6: every call is recorded, retried ones included (Rig:
// repeated_model_turn_reuses_prompt_without_recording_rejected_response).
func TestRetryTurnWithoutFeedbackRepeatsTheRequest(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	first := s.CallModel()
	a := runtest.Answer(llm.Text{Text: "rejected"})
	a.Usage, a.ID = llm.Usage{InputTokens: 3, OutputTokens: 4}, "resp_1"
	s.Reply(a)
	if err := r.RetryTurn(""); err != nil {
		t.Fatal(err)
	}
	second := s.CallModel()
	if second.Turn != 2 || !reflect.DeepEqual(first.Request, second.Request) {
		t.Fatalf("repeat changed the request: %+v", second.Request)
	}
	b := runtest.Answer(llm.Text{Text: "accepted"})
	b.Usage = llm.Usage{InputTokens: 5, OutputTokens: 6}
	s.Reply(b)
	done := s.Done()
	if done.Usage != (llm.Usage{InputTokens: 8, OutputTokens: 10}) || len(done.Calls) != 2 || done.Calls[0].ID != "resp_1" {
		t.Fatalf("done = %+v", done)
	}
	for _, m := range done.Messages {
		if m.Text() == "rejected" {
			t.Fatal("the rejected answer is in history")
		}
	}
}

// Rig: feedback_retry_records_rejected_response_and_corrective_prompt.
func TestRetryTurnWithFeedbackCommitsTheTurnAndTheFeedback(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyText("not json")
	if err := r.RetryTurn("Answer with JSON."); err != nil {
		t.Fatal(err)
	}
	cm := s.CallModel()
	msgs := cm.Request.Messages
	if len(msgs) != 3 || msgs[1].Text() != "not json" || msgs[2].Text() != "Answer with JSON." || msgs[2].Role != llm.RoleUser {
		t.Fatalf("messages = %+v", msgs)
	}
}

func TestRetryTurnOfAnEmptyTurnCommitsOnlyTheFeedback(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	s.Reply(runtest.Answer())
	if err := r.RetryTurn("say something"); err != nil {
		t.Fatal(err)
	}
	if cm := s.CallModel(); len(cm.Request.Messages) != 2 {
		t.Fatalf("messages = %+v", cm.Request.Messages)
	}
}

// Rig: model_turn_retry_rejects_tool_calls_without_advancing_to_execution.
func TestRetryTurnOfAToolTurnFailsTheRun(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(3)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "add", `{}`))
	err := r.RetryTurn("again")
	var se *run.StoppedError
	if !errors.As(err, &se) || !strings.Contains(se.Reason, "tool calls") {
		t.Fatalf("err = %v", err)
	}
	failedWith(t, r, run.ErrStopped)
}

func TestRetryTurnOutsideAwaitingAdvanceIsRefused(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), MaxTurns: run.Turns(2)})
	refused(t, r, "RetryTurn before any call", func() error { return r.RetryTurn("x") })
	s := runtest.New(t, r)
	s.CallModel()
	refused(t, r, "RetryTurn while awaiting the model", func() error { return r.RetryTurn("x") })
	s.ReplyText("a")
	s.Done()
	refused(t, r, "RetryTurn when done", func() error { return r.RetryTurn("x") })
}

// A retried final turn stays final.
func TestRetryTurnOfAFinalTurnStaysFinal(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(3)})
	if err := r.WrapUp("wrap"); err != nil {
		t.Fatal(err)
	}
	s := runtest.New(t, r)
	s.Expect("CallModel turn=1 messages=2 tools=[add] choice=none final")
	s.ReplyText("bad")
	if err := r.RetryTurn("fix it"); err != nil {
		t.Fatal(err)
	}
	s.Expect("CallModel turn=2 messages=4 tools=[add] choice=none final")
}

// SEMANTICS §6: an empty turn is not appended to history.
func TestEmptyTurnIsNotAppended(t *testing.T) {
	for _, parts := range [][]llm.Part{nil, {llm.Text{}}} {
		r := run.New(run.Config{Prompt: prompt("x")})
		s := runtest.New(t, r)
		s.CallModel()
		s.Reply(runtest.Answer(parts...))
		done := s.Done()
		if len(done.Messages) != 1 || done.Output != "" {
			t.Fatalf("parts %v: done = %+v", parts, done)
		}
	}
}

// SEMANTICS §6: an answerless turn stopped by length or content filter is
// an error naming the finish reason; partial text with a length stop is
// the answer (Rig: blocking_prompt_rejects_an_empty_truncated_turn,
// ..._a_reasoning_only_truncated_turn, ..._keeps_partial_output_and_records_the_reason).
func TestAnswerlessTruncatedTurn(t *testing.T) {
	cases := []struct {
		parts  []llm.Part
		finish llm.FinishReason
		fails  bool
	}{
		{nil, llm.FinishLength, true},
		{[]llm.Part{llm.Thinking{Text: "hmm"}}, llm.FinishLength, true},
		{[]llm.Part{llm.Text{}}, llm.FinishContentFilter, true},
		{[]llm.Part{llm.Text{Text: "partial"}}, llm.FinishLength, false},
		{[]llm.Part{llm.Image{URL: "http://x/y.png"}}, llm.FinishLength, false},
		{nil, llm.FinishStop, false},
	}
	for _, c := range cases {
		r := run.New(run.Config{Prompt: prompt("x")})
		s := runtest.New(t, r)
		s.CallModel()
		resp := runtest.Answer(c.parts...)
		resp.FinishReason = c.finish
		s.Reply(resp)
		_, err := r.Next()
		var te *run.TruncatedError
		if c.fails != errors.As(err, &te) {
			t.Fatalf("%+v: err = %v", c, err)
		}
		if c.fails {
			if te.FinishReason != c.finish || !strings.Contains(err.Error(), string(c.finish)) {
				t.Fatalf("error %v does not name %s", err, c.finish)
			}
			failedWith(t, r, run.ErrTruncated)
			if len(r.Messages()) != 1 {
				t.Fatalf("the answerless turn was committed: %+v", r.Messages())
			}
			continue
		}
		if got, _ := r.Response(); len(r.Calls()) != 1 || r.Calls()[0].FinishReason != c.finish || got.Output != resp.Text() {
			t.Fatalf("%+v: response %+v", c, got)
		}
	}
}

// SEMANTICS §6 / ADVERSARIAL 30, 32: malformed arguments are preresolved
// with the parse error; empty arguments count as {}; peers run.
func TestMalformedArgumentsArePreresolved(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{weather, add}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(
		runtest.Call("c1", "get_weather", `{"path": "a.go",}`),
		runtest.Call("c2", "add", ``),
		llm.ToolCall{ID: "c3", Name: "add", Arguments: `{"a":1}{"a":2}`, Malformed: true},
		runtest.Call("c4", "add", `[1,2]`),
	)
	ct := s.Expect("CallTools turn=1 [c1 get_weather (preresolved)] [c2 add] [c3 add (preresolved)] [c4 add (preresolved)]").(run.CallTools)
	if res := ct.Calls[0].Result; !res.IsError || !strings.Contains(res.Content, "invalid character") || !strings.Contains(res.Content, "not run") {
		t.Fatalf("c1 result = %+v", res)
	}
	if res := ct.Calls[3].Result; !strings.Contains(res.Content, "JSON object") {
		t.Fatalf("c4 result = %+v", res)
	}
	if string(ct.Calls[1].Call.Args()) != "{}" {
		t.Fatalf("empty arguments = %s", ct.Calls[1].Call.Args())
	}
	s.Results(runtest.Answers(ct.Calls, func(llm.ToolCall) llm.ToolResult { return llm.ToolResult{Content: "3"} })...)
	cm := s.CallModel()
	if err := llm.CheckHistory(cm.Request.Messages); err != nil {
		t.Fatal(err)
	}
}

// SEMANTICS §6 / ADVERSARIAL 14, 15: a truncated answer is refused and
// changes nothing; the same request can be retried.
func TestTruncatedAnswerIsRefused(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}})
	s := runtest.New(t, r)
	s.CallModel()
	cut := runtest.Answer(llm.ToolCall{ID: "c1", Name: "add", Arguments: `{"a":`, Incomplete: true})
	cut.Truncated, cut.Usage = true, llm.Usage{OutputTokens: 9}
	pe := refused(t, r, "ModelResponse(truncated)", func() error { return r.ModelResponse(cut) })
	if !strings.Contains(pe.Error(), "truncated") {
		t.Fatalf("message %q", pe.Error())
	}
	if len(r.Calls()) != 0 {
		t.Fatal("a refused answer was recorded")
	}
	s.ReplyText("ok")
	s.Done()
}

// ADVERSARIAL 29: a call cut off by the output limit is never run.
func TestIncompleteCallIsPreresolved(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	resp := runtest.Answer(runtest.Call("c1", "add", `{"a":1}`), llm.ToolCall{ID: "c2", Name: "ad", Arguments: `{"a":`, Incomplete: true})
	resp.FinishReason = llm.FinishLength
	s.Reply(resp)
	// The cut-off call is not presented for resolution even though its
	// name is cut too.
	ct := s.Expect(`CallTools turn=1 [c1 add {"a":1}] [c2 ad (preresolved)]`).(run.CallTools)
	if ct.Calls[1].Result.Content != run.CutOff || !ct.Calls[1].Result.IsError {
		t.Fatalf("result = %+v", ct.Calls[1].Result)
	}
}

func TestBadAnswersAreRefused(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x")})
	runtest.New(t, r).CallModel()
	cases := map[string]llm.Response{
		"user role":      {Message: prompt("hi")},
		"nil part":       {Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{nil}}},
		"result in turn": {Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{runtest.Result("c", "x")}}},
	}
	for name, resp := range cases {
		refused(t, r, name, func() error { return r.ModelResponse(resp) })
	}
	// An answer without a role is taken as the assistant's.
	if err := r.ModelResponse(llm.Response{Message: llm.Message{Parts: []llm.Part{llm.Text{Text: "hi"}}}}); err != nil {
		t.Fatal(err)
	}
	if done := runtest.New(t, r).Done(); done.Message.Role != llm.RoleAssistant {
		t.Fatalf("role %q", done.Message.Role)
	}
}

// The run copies the answer's parts: the driver may reuse its buffers.
func TestAnswerPartsAreCopied(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	parts := []llm.Part{runtest.Call("", "add", `{}`)}
	s.Reply(runtest.Answer(parts...))
	parts[0] = llm.Text{Text: "overwritten"}
	if ct := s.CallTools(); ct.Calls[0].Call.Name != "add" || ct.Calls[0].Call.ID != "call_1_1" {
		t.Fatalf("calls = %+v", ct.Calls)
	}
}

// Rig: parallel_tool_calls_surface_in_emission_order; SEMANTICS §7.
func TestResultsCommitInCallOrder(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add, weather}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "get_weather", `{}`), runtest.Call("c2", "add", `{}`), runtest.Call("c3", "add", `{}`))
	s.Expect(`CallTools turn=1 [c1 get_weather {}] [c2 add {}] [c3 add {}]`)
	if err := r.ToolResults([]llm.ToolResult{runtest.Result("c3", "3"), {CallID: "c1", Name: "wrong", Content: "1", IsError: true}, runtest.Result("c2", "2")}, "", "Note: you called add twice."); err != nil {
		t.Fatal(err)
	}
	cm := s.CallModel()
	last := cm.Request.Messages[len(cm.Request.Messages)-1]
	if last.Role != llm.RoleUser || len(last.Parts) != 4 {
		t.Fatalf("results message = %+v", last)
	}
	want := []llm.Part{
		llm.ToolResult{CallID: "c1", Name: "get_weather", Content: "1", IsError: true},
		llm.ToolResult{CallID: "c2", Name: "add", Content: "2"},
		llm.ToolResult{CallID: "c3", Name: "add", Content: "3"},
		llm.Text{Text: "Note: you called add twice."},
	}
	if !reflect.DeepEqual(last.Parts, want) {
		t.Fatalf("parts\n got %+v\nwant %+v", last.Parts, want)
	}
}

// SEMANTICS §7 / Rig: tool_results_validates_against_pending_calls.
func TestToolResultsValidation(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "add", `{}`), runtest.Call("c2", "add", `{"x":`))
	ct := s.CallTools()
	pre := *ct.Calls[1].Result
	ok := runtest.Result("c1", "1")
	cases := map[string][]llm.ToolResult{
		"missing":             {ok},
		"unknown id":          {ok, pre, runtest.Result("zz", "?")},
		"duplicate":           {ok, ok, pre},
		"preresolved changed": {ok, runtest.Result("c2", "ran it anyway")},
		"wrong id only":       {runtest.Result("c9", "1"), pre},
	}
	for name, rs := range cases {
		pe := refused(t, r, name, func() error { return r.ToolResults(rs) })
		if pe.Op != "ToolResults" {
			t.Fatalf("%s: %+v", name, pe)
		}
	}
	if pending := r.Pending(); len(pending) != 2 {
		t.Fatalf("pending = %+v", pending)
	}
	s.Results(pre, ok)
	if r.Pending() != nil {
		t.Fatal("pending after results")
	}
}

func TestBigBatchOfResults(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	calls := make([]llm.ToolCall, 40)
	for i := range calls {
		calls[i] = runtest.Call("", "add", `{}`)
	}
	s.ReplyCalls(calls...)
	ct := s.CallTools()
	rs := runtest.Answers(ct.Calls, func(llm.ToolCall) llm.ToolResult { return llm.ToolResult{Content: "ok"} })
	dup := append(append([]llm.ToolResult(nil), rs[:39]...), rs[0])
	refused(t, r, "duplicate in a big batch", func() error { return r.ToolResults(dup) })
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	s.Results(rs...)
	msgs := s.CallModel().Request.Messages
	if err := llm.CheckHistory(msgs); err != nil {
		t.Fatal(err)
	}
	if got := msgs[2].ToolResults()[0].CallID; got != "call_1_1" {
		t.Fatalf("first result answers %s", got)
	}
}

// SEMANTICS §2, §7: an empty ToolResults fails the run (Rig:
// empty_tool_results_cancel_the_run).
func TestEmptyToolResultsFailTheRun(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "add", `{}`))
	s.CallTools()
	err := r.ToolResults(nil)
	var se *run.StoppedError
	if !errors.As(err, &se) || !strings.Contains(se.Reason, "no tool results") {
		t.Fatalf("err = %v", err)
	}
	failedWith(t, r, run.ErrStopped)
}

// ADVERSARIAL 37: five parallel calls whose results come back out of order,
// some failed, give exactly five results in one message, in call order,
// before any note.
func TestFiveParallelResults(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	calls := make([]llm.ToolCall, 5)
	for i := range calls {
		calls[i] = runtest.Call("", "add", `{}`)
	}
	s.ReplyCalls(calls...)
	ct := s.CallTools()
	outcomes := []llm.ToolResult{
		{Content: "ok"}, {Content: "ok"}, {Content: "error: boom", IsError: true},
		{Content: "panic: nil map", IsError: true}, {Content: "timed out after 30s", IsError: true},
	}
	var rs []llm.ToolResult
	for _, i := range []int{4, 2, 0, 3, 1} {
		o := outcomes[i]
		o.CallID = ct.Calls[i].Call.ID
		rs = append(rs, o)
	}
	if err := r.ToolResults(rs, "Two tools failed."); err != nil {
		t.Fatal(err)
	}
	msgs := s.CallModel().Request.Messages
	last := msgs[len(msgs)-1]
	got := last.ToolResults()
	if len(got) != 5 || len(last.Parts) != 6 {
		t.Fatalf("results message = %+v", last)
	}
	for i, res := range got {
		if res.CallID != ct.Calls[i].Call.ID || res.Content != outcomes[i].Content || res.IsError != outcomes[i].IsError {
			t.Fatalf("result %d = %+v", i, res)
		}
		if _, isResult := last.Parts[i].(llm.ToolResult); !isResult {
			t.Fatalf("part %d is not a result", i)
		}
	}
	if err := llm.CheckHistory(msgs); err != nil {
		t.Fatal(err)
	}
}
