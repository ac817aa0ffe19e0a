package run_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
)

// Every input that is not in a state's row of the transition table is a
// *ProtocolError that leaves the run exactly as it was, and the correct
// input afterwards still succeeds (SEMANTICS §2; Rig:
// out_of_protocol_calls_are_rejected_without_corrupting_state).
func TestMisuseLeavesTheRunUnchanged(t *testing.T) {
	inputs := map[string]func(r *run.Run) error{
		"Next":          func(r *run.Run) error { _, err := r.Next(); return err },
		"ModelResponse": func(r *run.Run) error { return r.ModelResponse(runtest.Answer(llm.Text{Text: "x"})) },
		"Resolve":       func(r *run.Run) error { return r.Resolve(run.Fail{}) },
		"Approve":       func(r *run.Run) error { return r.Approve([]run.Decision{{CallID: "c2", Action: run.Approved}}) },
		"ToolResults":   func(r *run.Run) error { return r.ToolResults([]llm.ToolResult{runtest.Result("c1", "1")}) },
		"RetryTurn":     func(r *run.Run) error { return r.RetryTurn("again") },
		"WrapUp":        func(r *run.Run) error { return r.WrapUp("stop") },
	}
	// accepted lists the inputs each state takes (the transition table).
	accepted := map[string][]string{
		run.StatePreparingRequest:   {"Next", "WrapUp"},
		run.StateAwaitingModel:      {"ModelResponse"},
		run.StateResolvingToolCalls: {"Next", "Resolve"},
		run.StateAwaitingApproval:   {"Next", "Approve"},
		run.StateAwaitingAdvance:    {"Next", "RetryTurn"},
		run.StateExecutingTools:     {"Next", "ToolResults"},
		run.StateDone:               {"Next"},
	}
	for state, ok := range accepted {
		r := runIn(t, state)
		if r.State() != state {
			t.Fatalf("runIn(%s) gave %s", state, r.State())
		}
		for name, in := range inputs {
			if contains(ok, name) {
				continue
			}
			pe := refused(t, r, state+"/"+name, func() error { return in(r) })
			if pe.State != state || pe.Op != name {
				t.Fatalf("%s/%s: %+v", state, name, pe)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// runIn returns a run in the named state. Tools: search (free) and
// delete_file (needs approval).
func runIn(t *testing.T, state string) *run.Run {
	t.Helper()
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{search(), remove}, MaxTurns: run.Turns(3), MaxInvalidRetries: 1})
	s := runtest.New(t, r)
	switch state {
	case run.StatePreparingRequest:
		return r
	case run.StateDone:
		s.CallModel()
		s.ReplyText("done")
		s.Done()
		return r
	}
	s.CallModel()
	switch state {
	case run.StateAwaitingModel:
		return r
	case run.StateResolvingToolCalls:
		s.ReplyCalls(runtest.Call("c1", "serch", `{}`))
	case run.StateAwaitingApproval:
		s.ReplyCalls(runtest.Call("c1", "search", `{}`), runtest.Call("c2", "delete_file", `{}`))
	case run.StateAwaitingAdvance:
		s.ReplyCalls(runtest.Call("c1", "search", `{}`))
	case run.StateExecutingTools:
		s.ReplyCalls(runtest.Call("c1", "search", `{}`))
		s.CallTools()
	}
	return r
}

// After each refusal, the correct call succeeds.
func TestCorrectCallSucceedsAfterMisuse(t *testing.T) {
	r := runIn(t, run.StateAwaitingModel)
	refused(t, r, "Next while awaiting the model", func() error { _, err := r.Next(); return err })
	cm, ok := r.ModelCall()
	if !ok || cm.Turn != 1 {
		t.Fatalf("ModelCall = %+v %v", cm, ok)
	}
	if err := r.ModelResponse(runtest.Answer(runtest.Call("c1", "search", `{}`))); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.ModelCall(); ok {
		t.Fatal("ModelCall outside AwaitingModel")
	}
	refused(t, r, "ToolResults before CallTools", func() error { return r.ToolResults([]llm.ToolResult{runtest.Result("c1", "1")}) })
	s := runtest.New(t, r)
	s.CallTools()
	refused(t, r, "ModelResponse while tools are pending", func() error { return r.ModelResponse(runtest.Answer()) })
	refused(t, r, "results for the wrong ids", func() error { return r.ToolResults([]llm.ToolResult{runtest.Result("c9", "1")}) })
	s.Results(runtest.Result("c1", "1"))
	s.CallModel()
}

func TestNilResolutionIsRefused(t *testing.T) {
	r := runIn(t, run.StateResolvingToolCalls)
	refused(t, r, "Resolve(nil)", func() error { return r.Resolve(nil) })
	runtest.New(t, r).Resolve(run.Repair{Name: "search"})
}

// Every input on a failed run returns a *FailedError wrapping the original.
func TestFailedRunRefusesEverything(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), MaxTurns: run.Turns(0)})
	_, first := r.Next()
	calls := []error{
		r.ModelResponse(runtest.Answer()),
		r.Resolve(run.Fail{}),
		r.Approve(nil),
		r.ToolResults(nil),
		r.RetryTurn(""),
		r.WrapUp(""),
	}
	for i, err := range calls {
		var fe *run.FailedError
		if !errors.As(err, &fe) || fe.Err != first || !errors.Is(err, run.ErrMaxTurns) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

// Next is idempotent in every state that hands out a step again.
func TestNextIsIdempotent(t *testing.T) {
	for _, state := range []string{run.StateResolvingToolCalls, run.StateAwaitingApproval, run.StateExecutingTools, run.StateDone} {
		r := runIn(t, state)
		if state != run.StateDone && state != run.StateExecutingTools {
			a, err1 := r.Next()
			b, err2 := r.Next()
			if err1 != nil || err2 != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("%s: %v %v", state, err1, err2)
			}
			continue
		}
		before := snapshot(t, r)
		a, err1 := r.Next()
		b, err2 := r.Next()
		if err1 != nil || err2 != nil || !reflect.DeepEqual(a, b) || snapshot(t, r) != before {
			t.Fatalf("%s: %v %v", state, err1, err2)
		}
	}
}

// The state names follow the documented progression.
func TestStateProgression(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{search(), remove}, MaxTurns: run.Turns(2)})
	var seen []string
	note := func() { seen = append(seen, r.State()) }
	note()
	r.Next()
	note()
	r.ModelResponse(runtest.Answer(runtest.Call("c1", "serch", `{}`), runtest.Call("c2", "delete_file", `{}`)))
	note()
	r.Resolve(run.Repair{Name: "search"})
	note()
	r.Approve([]run.Decision{{CallID: "c2", Action: run.Approved}})
	note()
	r.Next()
	note()
	r.ToolResults([]llm.ToolResult{runtest.Result("c1", ""), runtest.Result("c2", "")})
	note()
	r.Next()
	r.ModelResponse(runtest.Answer(llm.Text{Text: "ok"}))
	note()
	r.Next()
	note()
	want := []string{"PreparingRequest", "AwaitingModel", "ResolvingToolCalls", "AwaitingApproval", "AwaitingAdvance", "ExecutingTools", "PreparingRequest", "AwaitingAdvance", "Done"}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("states\n got %v\nwant %v", seen, want)
	}
}
