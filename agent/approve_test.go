package agent_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/tool"
)

type pathArgs struct {
	Path string `json:"path"`
}

// writeTool needs approval to write under .git/ only (tool.Approvable).
func writeTool(wrote *[]string) tool.Tool {
	return tool.Func("write_file", "Writes a file.", func(_ context.Context, in pathArgs) (string, error) {
		*wrote = append(*wrote, in.Path)
		return "wrote " + in.Path, nil
	}, &tool.FuncOptions[pathArgs]{ApprovalFor: func(in pathArgs) bool { return strings.HasPrefix(in.Path, ".git/") }})
}

// guardedTool always needs approval (its spec says so).
func guardedTool(effect llm.Effect, ran *[]string) tool.Tool {
	return tool.Func("guarded_"+effect.String(), "", func(_ context.Context, in pathArgs) (string, error) {
		*ran = append(*ran, in.Path)
		return "ok " + in.Path, nil
	}, &tool.FuncOptions[pathArgs]{NeedsApproval: true, Effect: effect})
}

func pathCall(id, name, path string) llm.ToolCall {
	return modeltest.Call(id, name, `{"path":"`+path+`"}`)
}

func TestApprovers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		approver agent.Approver
		wantRan  []string
		denied   string
	}{
		{"nil denies", nil, nil, "Tool call denied: approval was not given (no approver is configured)"},
		{"allow all", agent.AllowAll, []string{"r", "d"}, ""},
		{"deny all", agent.DenyAll(""), nil, "Tool call denied: approval was not given"},
		{"deny all with reason", agent.DenyAll("ask Bob"), nil, "Tool call denied: ask Bob"},
		{"allow read-only", agent.AllowReadOnly, []string{"r"}, "Tool call denied: approval was not given: only read-only tools may run without asking"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran []string
			m := modeltest.NewScript(modeltest.ToolCalls(pathCall("1", "guarded_read_only", "r"), pathCall("2", "guarded_destructive", "d")), modeltest.Text("ok"))
			a := agent.New(agent.Config{Model: m, Approver: tc.approver,
				Tools: set(t, guardedTool(llm.EffectReadOnly, &ran), guardedTool(llm.EffectDestructive, &ran))})
			res, evs, err := runCollect(t, a, agent.Prompt("go"))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ran, tc.wantRan) {
				t.Fatalf("ran %v, want %v", ran, tc.wantRan)
			}
			if tc.denied != "" && lastResults(res.Messages)[1].Content != tc.denied {
				t.Fatalf("denied result = %q, want %q", lastResults(res.Messages)[1].Content, tc.denied)
			}
			if got := types(evs); !strings.Contains(got, "approval_requested approval_decided approval_decided tool_call") {
				t.Fatalf("events = %s", got)
			}
		})
	}
}

func TestRulesApprover(t *testing.T) {
	fallbackAsked := 0
	fallback := agent.ApproverFunc(func(_ context.Context, req agent.ApprovalRequest) ([]run.Decision, error) {
		fallbackAsked += len(req.Calls)
		return []run.Decision{{CallID: req.Calls[0].Call.ID, Action: run.Edited, Arguments: `{"path":"safe"}`}}, nil
	})
	ap, err := agent.Rules([]agent.Rule{
		{Tool: "guarded_*", Args: `"path":"/etc/`, Action: run.Denied, Reason: "not /etc"},
		{Tool: "guarded_read_only", Action: run.Approved},
	}, fallback)
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	m := modeltest.NewScript(modeltest.ToolCalls(
		pathCall("1", "guarded_read_only", "/etc/passwd"),
		pathCall("2", "guarded_read_only", "a.txt"),
		pathCall("3", "guarded_destructive", "b.txt"),
	), modeltest.Text("ok"))
	a := agent.New(agent.Config{Model: m, Approver: ap, Tools: set(t, guardedTool(llm.EffectReadOnly, &ran), guardedTool(llm.EffectDestructive, &ran))})
	res, err := a.Run(context.Background(), agent.Prompt("go"))
	if err != nil {
		t.Fatal(err)
	}
	rs := lastResults(res.Messages)
	if rs[0].Content != "Tool call denied: not /etc" || rs[1].Content != "ok a.txt" || rs[2].Content != "ok safe" {
		t.Fatalf("results = %+v", rs)
	}
	if fallbackAsked != 1 || !reflect.DeepEqual(ran, []string{"a.txt", "safe"}) {
		t.Fatalf("fallback asked about %d calls; ran %v", fallbackAsked, ran)
	}
	// The edited call is what history records.
	if c := res.Messages[1].ToolCalls()[2]; c.Arguments != `{"path":"safe"}` {
		t.Fatalf("history holds %+v", c)
	}
	for _, bad := range [][]agent.Rule{{{Tool: "[", Action: run.Approved}}, {{Args: "(", Action: run.Approved}}, {{Action: run.Edited}}} {
		if _, err := agent.Rules(bad, nil); !errors.Is(err, agent.ErrConfig) {
			t.Errorf("Rules(%+v) err = %v", bad, err)
		}
	}
}

// A tool.Approvable tool is asked per call: harmless arguments run without
// asking the Approver; the others are asked about.
func TestApprovableToolsAreAskedPerCall(t *testing.T) {
	var wrote []string
	asked := 0
	ap := agent.ApproverFunc(func(_ context.Context, req agent.ApprovalRequest) ([]run.Decision, error) {
		asked++
		var ds []run.Decision
		for _, c := range req.Calls {
			ds = append(ds, run.Decision{CallID: c.Call.ID, Action: run.Denied, Reason: "no git"})
		}
		return ds, nil
	})
	m := modeltest.NewScript(
		modeltest.ToolCalls(pathCall("1", "write_file", "main.go")),
		modeltest.ToolCalls(pathCall("2", "write_file", "x.go"), pathCall("3", "write_file", ".git/config")),
		modeltest.Text("ok"))
	res, evs, err := runCollect(t, agent.New(agent.Config{Model: m, Approver: ap, Tools: set(t, writeTool(&wrote))}), agent.Prompt("go"))
	if err != nil {
		t.Fatal(err)
	}
	if asked != 1 || !reflect.DeepEqual(wrote, []string{"main.go", "x.go"}) {
		t.Fatalf("asked %d times; wrote %v", asked, wrote)
	}
	if r := allResults(res.Messages)[2]; r.Content != "Tool call denied: no git" {
		t.Fatalf("result = %+v", r)
	}
	req := eventsOf[agent.ApprovalRequested](evs)
	if len(req) != 1 || len(req[0].Calls) != 1 || req[0].Calls[0].Call.ID != "3" {
		t.Fatalf("approval requests = %+v", req)
	}
}

func TestApprovalAbortAndBadDecisions(t *testing.T) {
	var ran []string
	tools := set(t, guardedTool(llm.EffectDestructive, &ran))
	script := func() *modeltest.Script {
		return modeltest.NewScript(modeltest.ToolCalls(pathCall("1", "guarded_destructive", "x")), modeltest.Text("ok"))
	}
	abort := agent.ApproverFunc(func(_ context.Context, req agent.ApprovalRequest) ([]run.Decision, error) {
		return []run.Decision{{CallID: "1", Action: run.Aborted, Reason: "user pressed ctrl-c"}}, nil
	})
	_, err := agent.New(agent.Config{Model: script(), Approver: abort, Tools: tools}).Run(context.Background(), agent.Prompt("go"))
	var se *run.StoppedError
	if !errors.As(err, &se) || se.Reason != "user pressed ctrl-c" {
		t.Fatalf("err = %v", err)
	}
	for name, ap := range map[string]agent.Approver{
		"none": agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) ([]run.Decision, error) { return nil, nil }),
		"unknown": agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) ([]run.Decision, error) {
			return []run.Decision{{CallID: "zz", Action: run.Approved}}, nil
		}),
		"failing": agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) ([]run.Decision, error) {
			return nil, errors.New("tty gone")
		}),
	} {
		_, err := agent.New(agent.Config{Model: script(), Approver: ap, Tools: tools}).Run(context.Background(), agent.Prompt("go"))
		if !errors.Is(err, agent.ErrApproval) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if len(ran) != 0 {
		t.Fatalf("ran %v", ran)
	}
}

func suspender() agent.Approver {
	return agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) ([]run.Decision, error) {
		return nil, agent.ErrSuspend
	})
}

// A run can wait for approval: Run returns its state, and Resume
// continues it with the decisions.
func TestSuspendAndResumeWithSnapshot(t *testing.T) {
	var ran []string
	m := modeltest.NewScript(modeltest.ToolCalls(pathCall("1", "guarded_destructive", "x"), pathCall("2", "add", "")), modeltest.Text("done"))
	m.Add() // nothing more: the resumed run must not call the model twice for turn 1
	a := agent.New(agent.Config{Model: m, Approver: suspender(), Tools: set(t, guardedTool(llm.EffectDestructive, &ran), addTool())})
	_, err := a.Run(context.Background(), agent.Prompt("go"))
	se := mustAs[*agent.SuspendedError](t, err)
	if !errors.Is(err, agent.ErrSuspend) || len(se.Calls) != 1 || se.Calls[0].Call.ID != "1" || se.Snapshot == nil {
		t.Fatalf("suspended = %+v", se)
	}
	// Decisions for calls that do not wait are refused.
	_, err = a.Resume(context.Background(), agent.Resumption{Snapshot: se.Snapshot, Decisions: []run.Decision{{CallID: "1", Action: run.Approved}, {CallID: "nope", Action: run.Approved}}})
	if !errors.Is(err, agent.ErrResume) {
		t.Fatalf("err = %v", err)
	}
	var evs []agent.Event
	res, err := a.Resume(context.Background(), agent.Resumption{
		Snapshot:  se.Snapshot,
		Decisions: []run.Decision{{CallID: "1", Action: run.Approved}},
		OnEvent:   func(e agent.Event) { evs = append(evs, e) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "done" || !reflect.DeepEqual(ran, []string{"x"}) || m.Calls() != 2 {
		t.Fatalf("res = %+v, ran %v, calls %d", res, ran, m.Calls())
	}
	if rs := eventsOf[agent.RunStarted](evs); len(rs) != 1 || !rs[0].Resumed || rs[0].RunID != se.RunID {
		t.Fatalf("run started = %+v", rs)
	}
}

// With a store, a suspended run resumes by id in another process: here a
// second agent over the same store.
func TestSuspendAndResumeByRunID(t *testing.T) {
	st := store.NewMemory()
	var ran []string
	tools := set(t, guardedTool(llm.EffectDestructive, &ran))
	m1 := modeltest.NewScript(modeltest.ToolCalls(pathCall("1", "guarded_destructive", "x")))
	a1 := agent.New(agent.Config{Model: m1, Approver: suspender(), Tools: tools, Store: st, Owner: "proc-1"})
	_, err := a1.Run(context.Background(), agent.Prompt("go"))
	se := mustAs[*agent.SuspendedError](t, err)
	info, err := st.Get(context.Background(), se.RunID)
	if err != nil || info.Status != store.StatusWaitingApproval {
		t.Fatalf("info = %+v, err = %v", info, err)
	}
	m2 := modeltest.NewScript(modeltest.Text("done"))
	a2 := agent.New(agent.Config{Model: m2, Approver: agent.DenyAll("unused"), Tools: tools, Store: st, Owner: "proc-2"})
	res, err := a2.Resume(context.Background(), agent.Resumption{RunID: se.RunID, Decisions: []run.Decision{{CallID: "1", Action: run.Denied, Reason: "later"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "done" || len(ran) != 0 || lastResults(res.Messages)[0].Content != "Tool call denied: later" {
		t.Fatalf("res = %+v, ran %v", res, ran)
	}
	if info, _ := st.Get(context.Background(), se.RunID); info.Status != store.StatusDone {
		t.Fatalf("status = %s", info.Status)
	}
	// Without decisions a resumed suspended run asks the Approver again.
	m3 := modeltest.NewScript(modeltest.ToolCalls(pathCall("1", "guarded_destructive", "y")), modeltest.Text("done"))
	a3 := agent.New(agent.Config{Model: m3, Approver: suspender(), Tools: tools, Store: st})
	_, err = a3.Run(context.Background(), agent.Prompt("again"))
	se = mustAs[*agent.SuspendedError](t, err)
	a4 := agent.New(agent.Config{Model: m3, Approver: agent.AllowAll, Tools: tools, Store: st})
	if _, err := a4.Resume(context.Background(), agent.Resumption{RunID: se.RunID}); err != nil || !reflect.DeepEqual(ran, []string{"y"}) {
		t.Fatalf("err = %v, ran %v", err, ran)
	}
}
