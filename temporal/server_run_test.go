package temporal

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/tool"
)

func parityTurns() []modeltest.Turn {
	return []modeltest.Turn{
		modeltest.ToolCalls(modeltest.Call("c1", "echo", `{"text":"one"}`), modeltest.Call("c2", "echo", `{"text":"two"}`)).WithUsage(llm.Usage{InputTokens: 5, OutputTokens: 2}),
		modeltest.ToolCalls(modeltest.Call("a1", "rm", `{"text":"old"}`), modeltest.Call("c3", "Echo", `{"text":"three"}`)).WithUsage(llm.Usage{InputTokens: 9, OutputTokens: 4}),
		modeltest.Text("finished").WithUsage(llm.Usage{InputTokens: 12, OutputTokens: 1}),
	}
}

// The same scripted run (parallel read-only tools, an approval, a repaired
// tool name) gives the same response in-process and on a real server, and
// its progress streams in order.
func TestServerParity(t *testing.T) {
	c := serverClient(t)
	ctx := testContext(t, time.Minute)
	queue := queueName(t)
	var removed atomic.Int64
	script := modeltest.NewScript(parityTurns()...)
	startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": script}, Tools: guarded(t, &removed)})

	in := Input{Model: "m", Tools: []string{"rm", "echo"}, Run: run.Config{System: "sys", Prompt: llm.UserText("tidy up"), MaxTurns: run.Turns(5)}, Options: fastOptions()}
	h, err := Start(ctx, c, in, client.StartWorkflowOptions{TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var last int64
	for e, err := range h.Progress(ctx, &ProgressOptions{Interval: 50 * time.Millisecond}) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq != last+1 {
			t.Fatalf("event %d after %d", e.Seq, last)
		}
		last = e.Seq
		kinds = append(kinds, string(e.Kind))
		if e.Kind == EventApproval {
			s, err := h.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if s.State != run.StateAwaitingApproval || len(s.Approvals) != 1 || s.Approvals[0].Call.ID != "a1" {
				t.Fatalf("status %+v", s)
			}
			if _, err := h.Approve(ctx, []run.Decision{{CallID: "a1", Action: run.Approved}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := "model_call model_answer tool_call tool_call tool_result tool_result model_call model_answer approval decision tool_call tool_result tool_call tool_result model_call model_answer done"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("events\n %s\nwant\n %s", got, want)
	}
	resp, err := h.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := inProcess(t, modeltest.NewScript(parityTurns()...), guarded(t, new(atomic.Int64)), in.Tools, in.Run, func(run.ApproveTools) []run.Decision {
		return []run.Decision{{CallID: "a1", Action: run.Approved}}
	})
	if err != nil {
		t.Fatal(err)
	}
	sameResponse(t, ref, resp)
	if removed.Load() != 1 {
		t.Fatalf("rm ran %d times", removed.Load())
	}
}

// ADVERSARIAL 74: an approval delivered twice is applied once (the same
// update id answers the first outcome), and a stale or unknown decision is
// rejected with a *RejectedError.
func TestServerApprovalIdempotent(t *testing.T) {
	c := serverClient(t)
	ctx := testContext(t, time.Minute)
	queue := queueName(t)
	var removed atomic.Int64
	script := modeltest.NewScript(
		modeltest.ToolCalls(modeltest.Call("a1", "rm", `{"text":"x"}`), modeltest.Call("a2", "rm", `{"text":"y"}`)),
		modeltest.ToolCalls(modeltest.Call("a3", "rm", `{"text":"z"}`)),
		modeltest.Text("done"),
	)
	startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": script}, Tools: guarded(t, &removed)})
	h, err := Start(ctx, c, Input{Model: "m", Tools: []string{"rm"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(5)}, Options: fastOptions()}, client.StartWorkflowOptions{TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, run.StateAwaitingApproval, 1)
	if _, err := h.Approve(ctx, []run.Decision{{CallID: "zz", Action: run.Approved}}); !errors.Is(err, ErrRejected) {
		t.Fatalf("unknown call: %v", err)
	}
	first, err := h.Approve(ctx, []run.Decision{{CallID: "a1", Action: run.Approved}})
	if err != nil || len(first.Waiting) != 1 {
		t.Fatalf("first: %+v, %v", first, err)
	}
	again, err := Approve(ctx, c, h.WorkflowID, []run.Decision{{CallID: "a1", Action: run.Approved}})
	if err != nil || len(again.Waiting) != 1 {
		t.Fatalf("the same decision again: %+v, %v; want the first outcome", again, err)
	}
	var re *RejectedError
	if _, err := h.Approve(ctx, []run.Decision{{CallID: "a1", Action: run.Denied, Reason: "no"}}); !errors.As(err, &re) || !strings.Contains(re.Reason, "duplicate") {
		t.Fatalf("a different decision for a decided call: %v", err)
	}
	if _, err := h.Approve(ctx, []run.Decision{{CallID: "a2", Action: run.Denied, Reason: "keep y"}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, h, run.StateAwaitingApproval, 2)
	if _, err := h.Approve(ctx, []run.Decision{{CallID: "a2", Action: run.Approved}}); !errors.As(err, &re) || !strings.Contains(re.Reason, "stale") {
		t.Fatalf("a stale decision: %v", err)
	}
	if _, err := h.Approve(ctx, []run.Decision{{CallID: "a3", Action: run.Approved}}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if removed.Load() != 2 || resp.Output != "done" {
		t.Fatalf("rm ran %d times (want 2: a1 and a3), output %q", removed.Load(), resp.Output)
	}
}

// waitState waits until the run is in state at turn turn.
func waitState(t *testing.T, h *Handle, state string, turn int) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	for {
		s, err := h.Status(ctx)
		if err == nil && s.State == state && s.Turn == turn {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the run did not reach %s at turn %d: %+v, %v", state, turn, s, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Cancelling a run on the server while a tool runs: the tool is told, the
// call is answered with Interrupted and what the tool said, and the
// workflow ends cancelled.
func TestServerCancel(t *testing.T) {
	c := serverClient(t)
	ctx := testContext(t, time.Minute)
	queue := queueName(t)
	started := make(chan string, 2)
	tools := mustSet(t, echoTool("echo", llm.EffectReadOnly), blocker("deploy", llm.EffectDestructive, started))
	script := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("r1", "echo", `{"text":"a"}`), modeltest.Call("w1", "deploy", `{"text":"prod"}`), modeltest.Call("w2", "deploy", `{"text":"dev"}`)), modeltest.Text("never"))
	startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": script}, Tools: tools})
	h, err := Start(ctx, c, Input{Model: "m", Tools: []string{"echo", "deploy"}, Run: run.Config{Prompt: llm.UserText("ship"), MaxTurns: run.Turns(3)}, Options: fastOptions()}, client.StartWorkflowOptions{TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("deploy did not start")
	}
	if err := h.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = h.Result(ctx)
	var ce *CancelledError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v, want *CancelledError", err)
	}
	msgs := ce.Response.Messages
	if err := llm.CheckHistory(msgs); err != nil || len(msgs) != 3 {
		t.Fatalf("history %v (%d messages)", err, len(msgs))
	}
	res := msgs[2].ToolResults()
	if res[0].Content != "echo: a" || !strings.HasPrefix(res[1].Content, Interrupted) || !strings.Contains(res[1].Content, "stopped half way") || res[2].Content != NotRun {
		t.Fatalf("results %+v", res)
	}
	var last Event
	for e, err := range h.Progress(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		last = e
	}
	if last.Kind != EventCancelled {
		t.Fatalf("the progress of a cancelled run ends with %+v", last)
	}
}

// A model failure that retrying cannot fix fails the run on the server
// with the model's error and kind, after one attempt.
func TestServerNonRetryableModelError(t *testing.T) {
	c := serverClient(t)
	ctx := testContext(t, time.Minute)
	queue := queueName(t)
	script := modeltest.NewScript(modeltest.Fail(model.KindAuth), modeltest.Text("never"))
	startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": script}})
	h, err := Start(ctx, c, Input{Model: "m", Run: run.Config{Prompt: llm.UserText("hi")}, Options: fastOptions()}, client.StartWorkflowOptions{TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Result(ctx)
	var me *model.Error
	if !errors.As(err, &me) || me.Kind != model.KindAuth || me.Retryable() {
		t.Fatalf("error %v, want a non-retryable *model.Error of kind auth", err)
	}
	if script.Calls() != 1 {
		t.Fatalf("%d model calls", script.Calls())
	}
}

// The progress of a run that ended while no worker is left to answer
// queries ends with a terminal event made from its result.
func TestServerProgressAfterWorkersLeft(t *testing.T) {
	c := serverClient(t)
	ctx := testContext(t, time.Minute)
	queue := queueName(t)
	script := modeltest.NewScript(modeltest.Text("bye").WithUsage(llm.Usage{OutputTokens: 1}))
	w, err := NewWorker(c, Registry{Models: map[string]model.Model{"m": script}}, &WorkerOptions{TaskQueue: queue, Worker: workerOptions()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	h, err := Start(ctx, c, Input{Model: "m", Run: run.Config{Prompt: llm.UserText("hi")}, Options: fastOptions()}, client.StartWorkflowOptions{TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Result(ctx); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	var events []Event
	for e, err := range h.Progress(ctx, &ProgressOptions{After: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	if len(events) != 1 || events[0].Kind != EventDone || events[0].Text != "bye" || events[0].Usage.OutputTokens != 1 {
		t.Fatalf("events %+v", events)
	}
}

// A tool attempt that timed out after it started is not repeated for a
// destructive tool (the call is answered with WorkerLost) and is repeated
// for a read-only one: the intent heartbeat of the first attempt tells the
// second. (The SDK's test environment does not retry timed out attempts,
// so this runs on a server.)
func TestServerTimedOutToolAttempt(t *testing.T) {
	c := serverClient(t)
	for _, tc := range []struct {
		effect llm.Effect
		starts int
		result string
	}{
		{llm.EffectDestructive, 1, WorkerLost},
		{llm.EffectReadOnly, 2, "second try"},
	} {
		t.Run(tc.effect.String(), func(t *testing.T) {
			var starts atomic.Int64
			slow := tool.Func("slow", "Hangs the first time.", func(ctx context.Context, in textIn) (string, error) {
				if starts.Add(1) == 1 {
					<-ctx.Done() // the attempt times out
					return "", ctx.Err()
				}
				return "second try", nil
			}, &tool.FuncOptions[textIn]{Effect: tc.effect})
			script := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("c1", "slow", `{"text":"x"}`)), modeltest.Text("ok"))
			queue := queueName(t)
			startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": script}, Tools: mustSet(t, slow)})
			in := Input{Model: "m", Tools: []string{"slow"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(2)}, Options: fastOptions()}
			in.Options.ToolTimeout = time.Second
			ctx := testContext(t, time.Minute)
			h, err := Start(ctx, c, in, client.StartWorkflowOptions{TaskQueue: queue})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := h.Result(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Messages[2].ToolResults()[0].Content; got != tc.result || starts.Load() != int64(tc.starts) {
				t.Fatalf("result %q after %d starts, want %q after %d", got, starts.Load(), tc.result, tc.starts)
			}
		})
	}
}
