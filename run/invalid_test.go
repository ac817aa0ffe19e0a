package run_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
)

func search() llm.ToolSpec { return llm.ToolSpec{Name: "search", Effect: llm.EffectReadOnly} }

// SEMANTICS §4: the allowed set per tool choice.
func TestAllowedSetPerToolChoice(t *testing.T) {
	tools := []llm.ToolSpec{search(), add}
	cases := []struct {
		choice  llm.ToolChoice
		call    string
		invalid bool
		allowed string
	}{
		{llm.ToolChoice{}, "search", false, ""},
		{llm.ToolChoice{}, "nope", true, "add,search"},
		{llm.ToolChoice{Mode: llm.ToolRequired}, "add", false, ""},
		{llm.ToolChoice{Mode: llm.ToolRequired}, "nope", true, "add,search"},
		{llm.ToolChoice{Mode: llm.ToolNone}, "search", true, ""},
		{llm.ChooseTools("add"), "add", false, ""},
		{llm.ChooseTools("add"), "search", true, "add"},
	}
	for _, c := range cases {
		r := run.New(run.Config{Prompt: prompt("x"), Tools: tools, ToolChoice: c.choice})
		s := runtest.New(t, r)
		s.CallModel()
		s.ReplyCalls(runtest.Call("c1", c.call, `{}`))
		step, err := r.Next()
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		rc, isResolve := step.(run.ResolveToolCall)
		if isResolve != c.invalid {
			t.Fatalf("choice %+v call %s: got %s", c.choice, c.call, runtest.Describe(step))
		}
		if isResolve && strings.Join(rc.Allowed, ",") != c.allowed {
			t.Fatalf("choice %+v: allowed %v, want %s", c.choice, rc.Allowed, c.allowed)
		}
	}
}

// SEMANTICS §4: an unsatisfiable tool choice is a local error before any
// model call.
func TestUnsatisfiableToolChoiceFailsBeforeAnyCall(t *testing.T) {
	cases := map[string]run.Config{
		"required without tools":       {Prompt: prompt("x"), ToolChoice: llm.ToolChoice{Mode: llm.ToolRequired}},
		"specific naming unadvertised": {Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, ToolChoice: llm.ChooseTools("search")},
		"specific naming none":         {Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, ToolChoice: llm.ToolChoice{Mode: llm.ToolSpecific}},
		"unknown mode":                 {Prompt: prompt("x"), ToolChoice: llm.ToolChoice{Mode: "sometimes"}},
	}
	for name, cfg := range cases {
		r := run.New(cfg)
		_, err := r.Next()
		var ce *run.ConfigError
		if !errors.As(err, &ce) || ce.Field != "ToolChoice" || !errors.Is(err, run.ErrConfig) {
			t.Fatalf("%s: err = %v", name, err)
		}
		if r.Turn() != 0 || len(r.Calls()) != 0 {
			t.Fatalf("%s: a model call was made", name)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	cases := map[string]struct {
		cfg   run.Config
		field string
	}{
		"nothing to send":     {run.Config{}, "Prompt"},
		"negative turns":      {run.Config{Prompt: prompt("x"), MaxTurns: run.Turns(-1)}, "MaxTurns"},
		"negative retries":    {run.Config{Prompt: prompt("x"), MaxInvalidRetries: -1}, "MaxInvalidRetries"},
		"duplicate tool":      {run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add, add}}, "Tools"},
		"unnamed tool":        {run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{{}}}, "Tools"},
		"assistant prompt":    {run.Config{Prompt: llm.AssistantText("x")}, "Prompt"},
		"open call in input":  {run.Config{Input: []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{runtest.Call("c1", "add", "")}}}, Prompt: prompt("x")}, "Input"},
		"nil part in prompt":  {run.Config{Prompt: llm.Message{Role: llm.RoleUser, Parts: []llm.Part{nil}}}, "Prompt"},
		"negative max tokens": {run.Config{Prompt: prompt("x"), MaxTokens: -5}, "MaxTokens"},
	}
	for name, c := range cases {
		r := run.New(c.cfg)
		_, err := r.Next()
		var ce *run.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: err = %v, want a ConfigError on %s", name, err, c.field)
		}
		failedWith(t, r, run.ErrConfig)
	}
}

// Rig: invalid_tool_call_fail_returns_unknown_tool_call.
func TestFailResolutionReturnsUnknownToolError(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{search()}})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "serch", `{"q":"go"}`))
	s.Expect(`ResolveToolCall turn=1 c1 "serch" allowed=[search] suggestion="search"`)
	s.Expect(`ResolveToolCall turn=1 c1 "serch" allowed=[search] suggestion="search"`) // idempotent
	err := r.Resolve(run.Fail{})
	var ue *run.UnknownToolError
	if !errors.As(err, &ue) || ue.Name != "serch" || ue.CallID != "c1" || strings.Join(ue.Allowed, ",") != "search" {
		t.Fatalf("err = %v", err)
	}
	failedWith(t, r, run.ErrUnknownTool)
}

// Rig: invalid_tool_call_stop_leaves_run_terminal.
func TestStopResolutionStopsTheRun(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{search()}})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "rm_everything", `{}`))
	s.ResolveToolCall()
	err := r.Resolve(run.Stop{Reason: "hallucinated a dangerous tool"})
	var se *run.StoppedError
	if !errors.As(err, &se) || se.Reason != "hallucinated a dangerous tool" {
		t.Fatalf("err = %v", err)
	}
	failedWith(t, r, run.ErrStopped)
	if len(r.Messages()) != 1 {
		t.Fatalf("messages = %+v", r.Messages())
	}
}

// Rig: invalid_tool_call_retry_rolls_back_with_feedback, and
// invalid_tool_call_hook_retries_mixed_non_streaming_turn_without_executing_valid_call.
func TestRetryResolutionAnswersEveryCallAndExecutesNothing(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{search(), add}, MaxTurns: run.Turns(3), MaxInvalidRetries: 1})
	s := runtest.New(t, r)
	s.CallModel()
	a := runtest.Answer(runtest.Call("c1", "search", `{}`), runtest.Call("c2", "serch", `{}`), runtest.Call("c3", "add", `{}`))
	a.Usage = llm.Usage{InputTokens: 7}
	s.Reply(a)
	s.Expect(`ResolveToolCall turn=1 c2 "serch" allowed=[add,search] suggestion="search"`)
	s.Resolve(run.Retry{Feedback: "no such tool; use search"})
	cm := s.Expect("CallModel turn=2 messages=3 tools=[search,add] choice=auto").(run.CallModel)
	msgs := cm.Request.Messages
	if err := llm.CheckHistory(msgs); err != nil {
		t.Fatal(err)
	}
	if got := msgs[1].ToolCalls(); len(got) != 3 || got[1].Name != "serch" {
		t.Fatalf("assistant turn not committed unchanged: %+v", msgs[1])
	}
	res := msgs[2].ToolResults()
	want := []string{run.NotExecuted, "no such tool; use search", run.NotExecuted}
	for i, w := range want {
		if res[i].Content != w || res[i].CallID != []string{"c1", "c2", "c3"}[i] {
			t.Fatalf("result %d = %+v, want %q", i, res[i], w)
		}
	}
	// The retry budget is per run: a second invalid call cannot retry.
	s.ReplyCalls(runtest.Call("c4", "serch", `{}`))
	s.ResolveToolCall()
	err := r.Resolve(run.Retry{Feedback: "again"})
	var ue *run.UnknownToolError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "MaxInvalidRetries") {
		t.Fatalf("err = %v", err)
	}
	if r.Usage().InputTokens != 7 || len(r.Calls()) != 2 {
		t.Fatalf("usage %+v calls %d", r.Usage(), len(r.Calls()))
	}
}

func TestRetryWithoutBudgetFails(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{search()}, MaxTurns: run.Turns(3)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "serch", `{}`))
	s.ResolveToolCall()
	if err := r.Resolve(run.Retry{}); !errors.Is(err, run.ErrUnknownTool) {
		t.Fatalf("err = %v", err)
	}
}

// Rig: invalid_tool_call_repair_renames_...; the scan continues after a
// repair, so a second invalid call of the turn is presented next.
func TestRepairRenamesAndScanningContinues(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{search(), add}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "Search", `{"q":"a"}`), runtest.Call("c2", "add", `{}`), runtest.Call("c3", "ADD", `{}`))
	s.Expect(`ResolveToolCall turn=1 c1 "Search" allowed=[add,search] suggestion="search"`)
	s.Resolve(run.Repair{Name: "search"})
	s.Expect(`ResolveToolCall turn=1 c3 "ADD" allowed=[add,search] suggestion="add"`)
	s.Resolve(run.Repair{Name: "add"})
	s.Expect(`CallTools turn=1 [c1 search {"q":"a"}] [c2 add {}] [c3 add {}]`)
	s.Results(runtest.Result("c3", "3"), runtest.Result("c1", "1"), runtest.Result("c2", "2"))
	cm := s.CallModel()
	if got := cm.Request.Messages[1].ToolCalls()[0].Name; got != "search" {
		t.Fatalf("committed name %q, want the repaired one", got)
	}
}

// Rig: invalid_tool_call_repair_to_disallowed_name_fails: the repaired name
// is checked against the allowed set, not the advertised one.
func TestRepairToADisallowedNameFails(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{search(), add}, ToolChoice: llm.ChooseTools("add")})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "serch", `{}`))
	s.ResolveToolCall()
	err := r.Resolve(run.Repair{Name: "search"})
	var ue *run.UnknownToolError
	if !errors.As(err, &ue) || ue.Name != "search" {
		t.Fatalf("err = %v, want UnknownToolError naming the repaired name", err)
	}
}

func TestRepairUnderToolChoiceNoneFails(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{search()}, ToolChoice: llm.ToolChoice{Mode: llm.ToolNone}})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "search", `{}`))
	s.Expect(`ResolveToolCall turn=1 c1 "search" allowed=[] suggestion=""`)
	if err := r.Resolve(run.Repair{Name: "search"}); !errors.Is(err, run.ErrUnknownTool) {
		t.Fatalf("err = %v", err)
	}
}

// Rig: invalid_tool_call_skip_suppresses_all_peer_executions.
func TestSkipPreresolvesEveryCall(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{search(), add}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "search", `{}`), runtest.Call("c2", "nope", `{}`), runtest.Call("c3", "add", `{}`), runtest.Call("c4", "nope2", `{}`))
	s.ResolveToolCall()
	s.Resolve(run.Skip{Reason: "nope is not a tool"})
	ct := s.Expect("CallTools turn=1 [c1 search (preresolved)] [c2 nope (preresolved)] [c3 add (preresolved)] [c4 nope2 (preresolved)]").(run.CallTools)
	want := []string{run.NotExecuted, "nope is not a tool", run.NotExecuted, run.NotExecuted}
	for i, c := range ct.Calls {
		if c.Result.Content != want[i] || !c.Result.IsError || c.Result.CallID != c.Call.ID {
			t.Fatalf("call %d result = %+v", i, c.Result)
		}
	}
	if ct.Calls[1].Spec.Name != "" || ct.Calls[0].Spec.Name != "search" {
		t.Fatalf("specs = %+v", ct.Calls)
	}
	s.Results(runtest.Answers(ct.Calls, nil)...)
	cm := s.CallModel()
	if err := llm.CheckHistory(cm.Request.Messages); err != nil {
		t.Fatal(err)
	}
	// The committed turn keeps the model's own names.
	if got := cm.Request.Messages[1].ToolCalls()[1].Name; got != "nope" {
		t.Fatalf("committed name %q", got)
	}
}

// Rig: skip_under_tool_choice_none_fails.
func TestSkipUnderToolChoiceNoneFails(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{search()}, ToolChoice: llm.ToolChoice{Mode: llm.ToolNone}})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "search", `{}`))
	s.ResolveToolCall()
	err := r.Resolve(run.Skip{Reason: "x"})
	var ue *run.UnknownToolError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "none") {
		t.Fatalf("err = %v", err)
	}
}

// Rig: skip_under_specific_tool_choice_returns_synthetic_feedback.
func TestSkipUnderSpecificChoice(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{search(), add}, ToolChoice: llm.ChooseTools("add"), MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "search", `{}`))
	s.Expect(`ResolveToolCall turn=1 c1 "search" allowed=[add] suggestion=""`)
	s.Resolve(run.Skip{})
	ct := s.CallTools()
	if !strings.Contains(ct.Calls[0].Result.Content, `"search" is not available`) {
		t.Fatalf("default skip text = %q", ct.Calls[0].Result.Content)
	}
}

// Rig: id_less_calls_keep_distinct_skip_results; SEMANTICS §4: id-less
// and duplicate ids are made unique deterministically.
func TestIDsAreMadeUnique(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(3),
		Input: []llm.Message{
			prompt("earlier"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{runtest.Call("old", "add", "")}},
			{Role: llm.RoleUser, Parts: []llm.Part{runtest.Result("old", "1")}},
			llm.AssistantText("ok"),
		}})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("", "add", `{}`), runtest.Call("", "add", `{}`), runtest.Call("dup", "add", `{}`), runtest.Call("dup", "add", `{}`), runtest.Call("old", "add", `{}`))
	ct := s.CallTools()
	want := []struct{ id, provider string }{{"call_1_1", ""}, {"call_1_2", ""}, {"dup", ""}, {"call_1_4", "dup"}, {"call_1_5", "old"}}
	for i, w := range want {
		if c := ct.Calls[i].Call; c.ID != w.id || c.ProviderID != w.provider {
			t.Fatalf("call %d: id %q provider %q, want %q %q", i, c.ID, c.ProviderID, w.id, w.provider)
		}
	}
	s.Results(runtest.Answers(ct.Calls, func(llm.ToolCall) llm.ToolResult { return llm.ToolResult{Content: "ok"} })...)
	s.CallModel()
	// Turn 2 reuses a minted id as its own: it collides and is minted again.
	s.ReplyCalls(runtest.Call("call_2_1", "add", `{}`), runtest.Call("call_1_1", "add", `{}`))
	ct = s.CallTools()
	if a, b := ct.Calls[0].Call.ID, ct.Calls[1].Call.ID; a != "call_2_1" || b != "call_2_2" {
		t.Fatalf("turn 2 ids %q %q", a, b)
	}
}

func TestMintedIDSkipsTakenNames(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("call_1_2", "add", `{}`), runtest.Call("", "add", `{}`))
	ct := s.CallTools()
	if got := ct.Calls[1].Call.ID; got != "call_1_2_2" {
		t.Fatalf("minted %q", got)
	}
}

// SEMANTICS §4: invalid calls come one at a time, in emission order.
func TestInvalidCallsComeInEmissionOrder(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "b", `{}`), runtest.Call("c2", "add", `{}`), runtest.Call("c3", "a", `{}`))
	if got := s.ResolveToolCall().Call.ID; got != "c1" {
		t.Fatalf("first invalid = %s", got)
	}
	s.Resolve(run.Repair{Name: "add"})
	if got := s.ResolveToolCall().Call.ID; got != "c3" {
		t.Fatalf("second invalid = %s", got)
	}
}
