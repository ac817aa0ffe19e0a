package run_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
)

func approvalRun(t *testing.T) (*run.Run, *runtest.Script) {
	r := run.New(run.Config{Prompt: prompt("clean up"), Tools: []llm.ToolSpec{search(), remove, {Name: "write_file", NeedsApproval: true}}, MaxTurns: run.Turns(3)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(
		runtest.Call("c1", "search", `{"q":"tmp"}`),
		runtest.Call("c2", "delete_file", `{"path":"a.tmp"}`),
		runtest.Call("c3", "write_file", `{"path":"b"}`),
		runtest.Call("c4", "delete_file", `{"path":"c.tmp"}`),
	)
	return r, s
}

// SEMANTICS §5: ApproveTools lists every call of the turn needing approval;
// approve, edit and deny apply; denied calls are preresolved.
func TestApprovalsApproveEditDeny(t *testing.T) {
	r, s := approvalRun(t)
	s.Expect(`ApproveTools turn=1 [c2 delete_file {"path":"a.tmp"}] [c3 write_file {"path":"b"}] [c4 delete_file {"path":"c.tmp"}]`)
	if r.State() != run.StateAwaitingApproval {
		t.Fatalf("state %s", r.State())
	}
	s.Approve(
		run.Decision{CallID: "c4", Action: run.Denied, Reason: "keep c.tmp"},
		run.Decision{CallID: "c2", Action: run.Approved},
		run.Decision{CallID: "c3", Action: run.Edited, Arguments: `{"path":"b.txt"}`},
	)
	ct := s.Expect(`CallTools turn=1 [c1 search {"q":"tmp"}] [c2 delete_file {"path":"a.tmp"}] [c3 write_file {"path":"b.txt"}] [c4 delete_file (preresolved)]`).(run.CallTools)
	if res := ct.Calls[3].Result; res.Content != "Tool call denied: keep c.tmp" || !res.IsError {
		t.Fatalf("denied result = %+v", res)
	}
	if !ct.Calls[1].Spec.NeedsApproval {
		t.Fatal("spec not carried")
	}
	s.Results(runtest.Answers(ct.Calls, func(c llm.ToolCall) llm.ToolResult { return llm.ToolResult{Content: "done " + c.Name} })...)
	cm := s.CallModel()
	if err := llm.CheckHistory(cm.Request.Messages); err != nil {
		t.Fatal(err)
	}
	if got := cm.Request.Messages[1].ToolCalls()[2].Arguments; got != `{"path":"b.txt"}` {
		t.Fatalf("history keeps %q, want the edited arguments", got)
	}
}

func TestApprovalAbortStopsTheRun(t *testing.T) {
	r, s := approvalRun(t)
	s.ApproveTools()
	// An abort needs no decision for the other calls.
	err := r.Approve([]run.Decision{{CallID: "c3", Action: run.Aborted, Reason: "user pressed ctrl-c"}})
	var se *run.StoppedError
	if !errors.As(err, &se) || se.Reason != "user pressed ctrl-c" {
		t.Fatalf("err = %v", err)
	}
	failedWith(t, r, run.ErrStopped)
}

// SEMANTICS §5: a missing or extra decision is a *ProtocolError, and the
// run is unchanged.
func TestApprovalMisuseIsRefused(t *testing.T) {
	r, s := approvalRun(t)
	s.ApproveTools()
	all := func(extra ...run.Decision) []run.Decision {
		return append([]run.Decision{{CallID: "c2", Action: run.Approved}, {CallID: "c3", Action: run.Approved}, {CallID: "c4", Action: run.Approved}}, extra...)
	}
	cases := map[string][]run.Decision{
		"missing":            all()[:2],
		"none":               nil,
		"extra for c1":       all(run.Decision{CallID: "c1", Action: run.Approved}),
		"unknown id":         all(run.Decision{CallID: "zz", Action: run.Approved}),
		"twice":              all(run.Decision{CallID: "c2", Action: run.Denied}),
		"bad action":         {{CallID: "c2", Action: "maybe"}, {CallID: "c3", Action: run.Approved}, {CallID: "c4", Action: run.Approved}},
		"edit to non-object": {{CallID: "c2", Action: run.Edited, Arguments: `[1]`}, {CallID: "c3", Action: run.Approved}, {CallID: "c4", Action: run.Approved}},
		"edit to bad JSON":   {{CallID: "c2", Action: run.Edited, Arguments: `{"a":`}, {CallID: "c3", Action: run.Approved}, {CallID: "c4", Action: run.Approved}},
		"abort for unknown":  {{CallID: "zz", Action: run.Aborted}},
	}
	for name, ds := range cases {
		pe := refused(t, r, name, func() error { return r.Approve(ds) })
		if pe.Op != "Approve" || pe.State != run.StateAwaitingApproval {
			t.Fatalf("%s: %+v", name, pe)
		}
	}
	s.Approve(all()...) // the correct call still succeeds
	s.CallTools()
}

// SEMANTICS §5: a run waiting for approval serializes and resumes in
// another process (Rig: durable_human_in_the_loop_approval_survives_serialize_resume).
func TestApprovalSurvivesSerializeResume(t *testing.T) {
	r, s := approvalRun(t)
	s.ApproveTools()
	saved, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var resumed run.Run
	if err := json.Unmarshal(saved, &resumed); err != nil {
		t.Fatal(err)
	}
	s2 := runtest.New(t, &resumed)
	at := s2.ApproveTools()
	if len(at.Calls) != 3 {
		t.Fatalf("resumed approval lists %d calls", len(at.Calls))
	}
	// Decisions can themselves travel as JSON.
	raw := `[{"call_id":"c2","action":"approved"},{"call_id":"c3","action":"denied","reason":"no"},{"call_id":"c4","action":"edited","arguments":"{}"}]`
	var ds []run.Decision
	if err := json.Unmarshal([]byte(raw), &ds); err != nil {
		t.Fatal(err)
	}
	s2.Approve(ds...)
	ct := s2.CallTools()
	if ct.Calls[2].Result == nil || ct.Calls[3].Call.Arguments != "{}" {
		t.Fatalf("calls = %+v", ct.Calls)
	}
	s2.Results(runtest.Answers(ct.Calls, func(llm.ToolCall) llm.ToolResult { return llm.ToolResult{Content: "ok"} })...)
	s2.CallModel()
	s2.ReplyText("cleaned")
	if s2.Done().Output != "cleaned" {
		t.Fatal("resumed run did not complete")
	}
}

// Calls that will not run (malformed arguments) are not asked about.
func TestMalformedCallsNeedNoApproval(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{remove}})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "delete_file", `{"path":`), runtest.Call("c2", "delete_file", `{"path":"x"}`))
	at := s.ApproveTools()
	if len(at.Calls) != 1 || at.Calls[0].Call.ID != "c2" {
		t.Fatalf("approval lists %+v", at.Calls)
	}
}

func TestDecisionJSON(t *testing.T) {
	d := run.Decision{CallID: "c1", Action: run.Edited, Arguments: `{"a":1}`}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"call_id":"c1","action":"edited","arguments":"{\"a\":1}"}`; string(b) != want {
		t.Fatalf("got %s want %s", b, want)
	}
	var back run.Decision
	if err := json.Unmarshal(b, &back); err != nil || back != d {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
	if !strings.HasPrefix(run.DeniedPrefix, "Tool call denied") {
		t.Fatal(run.DeniedPrefix)
	}
}
