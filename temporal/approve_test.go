package temporal

import (
	"context"

	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/tool"
)

// updateResult collects the outcome of a test environment update.
type updateResult struct {
	rejected error
	err      error
	result   ApprovalResult
	done     bool
}

func (u *updateResult) Reject(err error) { u.rejected, u.done = err, true }
func (u *updateResult) Accept()          {}
func (u *updateResult) Complete(v any, err error) {
	u.done, u.err = true, err
	if r, ok := v.(ApprovalResult); ok {
		u.result = r
	}
}

func guarded(t *testing.T, count *atomic.Int64) *tool.Set {
	return mustSet(t,
		tool.Func("rm", "Removes a file.", func(_ context.Context, in textIn) (string, error) {
			count.Add(1)
			return "removed " + in.Text, nil
		}, &tool.FuncOptions[textIn]{NeedsApproval: true}),
		echoTool("echo", llm.EffectReadOnly),
	)
}

func approvalTurns() []modeltest.Turn {
	return []modeltest.Turn{
		modeltest.ToolCalls(modeltest.Call("a1", "rm", `{"text":"x"}`), modeltest.Call("e1", "echo", `{"text":"hi"}`), modeltest.Call("a2", "rm", `{"text":"y"}`)),
		modeltest.ToolCalls(modeltest.Call("a3", "rm", `{"text":"z"}`)),
		modeltest.Text("done"),
	}
}

// Approvals arrive as updates: partial decisions accumulate, a duplicate,
// an unknown id, a malformed edit and a stale decision are rejected and
// change nothing, and the run goes on when every call is decided.
func TestApprovalsByUpdate(t *testing.T) {
	var removed atomic.Int64
	tools := guarded(t, &removed)
	script := modeltest.NewScript(approvalTurns()...)
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: tools}
	in := Input{Model: "m", Tools: []string{"rm", "echo"}, Run: run.Config{Prompt: llm.UserText("clean up"), MaxTurns: run.Turns(5)}}
	env := newEnv(t, reg)

	// Updates are delivered after the callback that sends them returns,
	// in the order sent; their outcomes are checked a second later.
	send := func(id string, ds ...run.Decision) *updateResult {
		u := &updateResult{}
		env.UpdateWorkflow(UpdateApprove, id, u, ds)
		return u
	}
	mustReject := func(u *updateResult, want string) {
		t.Helper()
		if !u.done || u.rejected == nil {
			t.Errorf("update answered %v, %+v: want a rejection saying %q", u.done, u.result, want)
			return
		}
		if !strings.Contains(u.rejected.Error(), want) {
			t.Errorf("rejection %q does not say %q", u.rejected, want)
		}
	}
	mustAccept := func(u *updateResult, waiting ...string) {
		t.Helper()
		if !u.done || u.rejected != nil || u.err != nil || strings.Join(u.result.Waiting, ",") != strings.Join(waiting, ",") {
			t.Errorf("update answered %v, rejected %v, error %v, result %+v: want accepted with %v waiting", u.done, u.rejected, u.err, u.result, waiting)
		}
	}
	status := func() Status {
		v, err := env.QueryWorkflow(QueryStatus)
		if err != nil {
			t.Fatal(err)
		}
		var s Status
		if err := v.Get(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	var steps []string
	var u0, u1, u1again, u2, u3, u4, u5, u6, u7, u8, u9 *updateResult
	env.RegisterDelayedCallback(func() {
		s := status()
		if s.State != run.StateAwaitingApproval || len(s.Approvals) != 2 || s.Approvals[0].Call.ID != "a1" || s.Approvals[1].Call.ID != "a2" {
			t.Errorf("status while waiting: %+v", s)
		}
		u0 = send("u0", run.Decision{CallID: "nope", Action: run.Approved})
		u1 = send("u1", run.Decision{CallID: "a1", Action: run.Approved})
		u1again = send("u1", run.Decision{CallID: "a1", Action: run.Approved}) // the same update delivered twice
		u2 = send("u2", run.Decision{CallID: "a1", Action: run.Denied, Reason: "changed my mind"})
		u3 = send("u3", run.Decision{CallID: "a2", Action: run.Edited, Arguments: `{"text":`})
		u4 = send("u4", run.Decision{CallID: "a2", Action: "maybe"})
		u5 = send("u5", run.Decision{CallID: "a2", Action: run.Approved}, run.Decision{CallID: "a2", Action: run.Denied})
		u6 = send("u6")
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		mustReject(u0, `call "nope" does not wait for approval`)
		mustAccept(u1, "a2")
		mustAccept(u1again, "a2")
		mustReject(u2, "duplicate")
		mustReject(u3, "not one JSON object")
		mustReject(u4, "unknown action")
		mustReject(u5, "two decisions")
		mustReject(u6, "no decisions")
		// e1 (echo) was approved on the spot: its tool needs no approval
		// for its arguments.
		if s := status(); len(s.Decided) != 2 || len(s.Approvals) != 1 || s.Decided[0].CallID != "a1" || s.Decided[1].CallID != "e1" {
			t.Errorf("rejected updates changed the approval: %+v", s)
		}
		u7 = send("u7", run.Decision{CallID: "a2", Action: run.Edited, Arguments: `{"text":"y2"}`})
		steps = append(steps, "first approval")
	}, time.Minute+time.Second)
	env.RegisterDelayedCallback(func() {
		mustAccept(u7)
		if s := status(); s.State != run.StateAwaitingApproval || len(s.Approvals) != 1 || s.Approvals[0].Call.ID != "a3" {
			t.Errorf("status at the second approval: %+v", s)
		}
		u8 = send("u8", run.Decision{CallID: "a1", Action: run.Approved})
		u9 = send("u9", run.Decision{CallID: "a3", Action: run.Denied, Reason: "not that one"})
		steps = append(steps, "second approval")
	}, 2*time.Minute)
	env.ExecuteWorkflow(WorkflowName, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	resp := res.Response
	mustReject(u8, "stale")
	mustAccept(u9)
	if strings.Join(steps, ", ") != "first approval, second approval" {
		t.Fatalf("steps %v", steps)
	}
	if removed.Load() != 2 {
		t.Fatalf("rm ran %d times, want 2 (a1 approved, a2 edited, a3 denied)", removed.Load())
	}
	var got []string
	for _, m := range resp.Messages {
		for _, r := range m.ToolResults() {
			got = append(got, r.CallID+"="+r.Content)
		}
	}
	want := "a1=removed x|e1=echo: hi|a2=removed y2|a3=" + run.DeniedPrefix + "not that one"
	if strings.Join(got, "|") != want {
		t.Fatalf("results\n %s\nwant\n %s", strings.Join(got, "|"), want)
	}
	// The same decisions in-process give the same run.
	ref, err := inProcess(t, modeltest.NewScript(approvalTurns()...), guarded(t, new(atomic.Int64)), in.Tools, in.Run, func(s run.ApproveTools) []run.Decision {
		if s.Turn == 1 {
			return []run.Decision{{CallID: "a1", Action: run.Approved}, {CallID: "a2", Action: run.Edited, Arguments: `{"text":"y2"}`}}
		}
		return []run.Decision{{CallID: "a3", Action: run.Denied, Reason: "not that one"}}
	})
	if err != nil {
		t.Fatal(err)
	}
	sameResponse(t, ref, resp)
}

// ADVERSARIAL 74: a decision that comes after its approval timed out is
// rejected as stale; the undecided call was denied.
func TestApprovalTimeout(t *testing.T) {
	var removed atomic.Int64
	script := modeltest.NewScript(
		modeltest.ToolCalls(modeltest.Call("a1", "rm", `{"text":"x"}`)),
		modeltest.ToolCalls(modeltest.Call("a2", "rm", `{"text":"y"}`)),
		modeltest.Text("ok"),
	)
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: guarded(t, &removed)}
	in := Input{Model: "m", Tools: []string{"rm"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(3)}}
	in.Options.ApprovalTimeout = time.Hour
	env := newEnv(t, reg)
	late, next := &updateResult{}, &updateResult{}
	env.RegisterDelayedCallback(func() {
		// The first approval timed out at 1h; the second waits since.
		env.UpdateWorkflow(UpdateApprove, "late", late, []run.Decision{{CallID: "a1", Action: run.Approved}})
		env.UpdateWorkflow(UpdateApprove, "next", next, []run.Decision{{CallID: "a2", Action: run.Approved}})
	}, 90*time.Minute)
	env.ExecuteWorkflow(WorkflowName, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if late.rejected == nil || !strings.Contains(late.rejected.Error(), "stale") {
		t.Fatalf("the late decision was answered %+v, want rejected as stale", late)
	}
	if next.rejected != nil || next.err != nil || !next.done {
		t.Fatalf("the second decision was answered %+v", next)
	}
	if removed.Load() != 1 {
		t.Fatalf("rm ran %d times, want once (a2)", removed.Load())
	}
	msgs := res.Response.Messages
	contains(t, "the timed out call's result", msgs[2].ToolResults()[0].Content, "no decision arrived within 1h0m0s")
	if got := msgs[4].ToolResults()[0].Content; got != "removed y" {
		t.Fatalf("a2 answered %q", got)
	}
}

// An aborted decision stops the run at once, whatever else is pending.
func TestApprovalAbort(t *testing.T) {
	var removed atomic.Int64
	script := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("a1", "rm", `{"text":"x"}`), modeltest.Call("a2", "rm", `{"text":"y"}`)), modeltest.Text("never"))
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: guarded(t, &removed)}
	env := newEnv(t, reg)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateApprove, "abort", &updateResult{}, []run.Decision{{CallID: "a2", Action: run.Aborted, Reason: "wrong plan"}})
	}, time.Minute)
	env.ExecuteWorkflow(WorkflowName, Input{Model: "m", Tools: []string{"rm"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(3)}})
	err := decodeError(env.GetWorkflowError())
	var st *run.StoppedError
	if !errorsAs(err, &st) || st.Reason != "wrong plan" {
		t.Fatalf("error %v, want *run.StoppedError", err)
	}
	if removed.Load() != 0 || script.Calls() != 1 {
		t.Fatalf("after an abort: %d removals, %d model calls", removed.Load(), script.Calls())
	}
}

type pathIn struct {
	Path string `json:"path"`
}

// Approval by arguments, as in-process: a write to main.go runs at once, a
// write to .git/config waits for a decision; a repaired call is judged
// again on a worker.
func TestApprovalByArguments(t *testing.T) {
	var wrote []string
	var mu sync.Mutex
	write := tool.Func("write", "Writes a file.", func(_ context.Context, in pathIn) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		wrote = append(wrote, in.Path)
		return "wrote " + in.Path, nil
	}, &tool.FuncOptions[pathIn]{ApprovalFor: func(in pathIn) bool { return strings.HasPrefix(in.Path, ".git/") }})
	turns := func() []modeltest.Turn {
		return []modeltest.Turn{
			modeltest.ToolCalls(modeltest.Call("w1", "write", `{"path":"main.go"}`), modeltest.Call("w2", "write", `{"path":".git/config"}`), modeltest.Call("w3", "Write", `{"path":"b.go"}`)),
			modeltest.Text("ok"),
		}
	}
	tools := mustSet(t, write)
	reg := Registry{Models: map[string]model.Model{"m": modeltest.NewScript(turns()...)}, Tools: tools}
	env := newEnv(t, reg)
	var asked int
	env.SetOnActivityCompletedListener(func(info *activityInfo, _ converter.EncodedValue, _ error) {
		if info.ActivityType.Name == ActivityApproval {
			asked++
		}
	})
	var waiting Status
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		if err == nil {
			err = v.Get(&waiting)
		}
		if err != nil {
			t.Error(err)
		}
		env.UpdateWorkflow(UpdateApprove, "", &updateResult{}, []run.Decision{{CallID: "w2", Action: run.Denied, Reason: "hands off .git"}})
	}, time.Minute)
	in := Input{Model: "m", Tools: []string{"write"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(3)}}
	env.ExecuteWorkflow(WorkflowName, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(waiting.Approvals) != 1 || waiting.Approvals[0].Call.ID != "w2" {
		t.Fatalf("waiting for %+v, want w2 alone", waiting.Approvals)
	}
	if asked != 1 {
		t.Fatalf("the worker was asked %d times; want once, for the repaired call", asked)
	}
	if strings.Join(wrote, " ") != "main.go b.go" {
		t.Fatalf("wrote %v", wrote)
	}
	var res Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	ref, err := inProcess(t, modeltest.NewScript(turns()...), mustSet(t, write), in.Tools, in.Run, func(run.ApproveTools) []run.Decision {
		return []run.Decision{{CallID: "w2", Action: run.Denied, Reason: "hands off .git"}}
	})
	if err != nil {
		t.Fatal(err)
	}
	sameResponse(t, ref, res.Response)
}
