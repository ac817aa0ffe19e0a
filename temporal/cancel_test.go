package temporal

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/tool"
)

// blocker is a tool that runs until its context ends, and says when it
// started.
func blocker(name string, effect llm.Effect, started chan<- string) tool.Tool {
	return tool.Func(name, "Runs until stopped.", func(ctx context.Context, in textIn) (string, error) {
		started <- in.Text
		select {
		case <-ctx.Done():
			return "", errors.New("stopped half way")
		case <-time.After(20 * time.Second):
			return "finished " + in.Text, nil
		}
	}, &tool.FuncOptions[textIn]{Effect: effect})
}

// Cancelling a run answers every open call (the finished one keeps its
// result, the running one is interrupted, the one that had not started is
// not run) and ends the workflow cancelled with those messages.
func TestCancelClosesOpenCalls(t *testing.T) {
	started := make(chan string, 4)
	tools := mustSet(t, echoTool("echo", llm.EffectReadOnly), blocker("deploy", llm.EffectDestructive, started))
	script := modeltest.NewScript(modeltest.ToolCalls(
		modeltest.Call("r1", "echo", `{"text":"a"}`),
		modeltest.Call("w1", "deploy", `{"text":"prod"}`),
		modeltest.Call("w2", "deploy", `{"text":"staging"}`),
	), modeltest.Text("never"))
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: tools}
	env := newEnv(t, reg)
	env.SetOnActivityStartedListener(func(info *activityInfo, _ context.Context, _ encodedValues) {
		if info.ActivityType.Name == ActivityTool {
			go func() {
				if <-started == "prod" {
					env.CancelWorkflow()
				}
			}()
		}
	})
	in := Input{Model: "m", Tools: []string{"echo", "deploy"}, Run: run.Config{Prompt: llm.UserText("ship it"), MaxTurns: run.Turns(3)}}
	in.Options.ToolHeartbeat = 2 * time.Second
	env.ExecuteWorkflow(WorkflowName, in)
	err := decodeError(env.GetWorkflowError())
	var ce *CancelledError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCancelled) {
		t.Fatalf("error %v, want *CancelledError", err)
	}
	msgs := ce.Response.Messages
	if err := llm.CheckHistory(msgs); err != nil {
		t.Fatalf("the cancelled run's history is broken: %v", err)
	}
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want prompt, calls, results", len(msgs))
	}
	res := msgs[2].ToolResults()
	if len(res) != 3 || res[0].Content != "echo: a" || res[0].IsError {
		t.Fatalf("results %+v", res)
	}
	// (What the tool said when stopped is added on a real server; the
	// test environment does not pass a cancelled activity's details.)
	if !res[1].IsError || !strings.HasPrefix(res[1].Content, Interrupted) {
		t.Fatalf("the running call got %+v, want %q", res[1], Interrupted)
	}
	if !res[2].IsError || res[2].Content != NotRun {
		t.Fatalf("the call that had not started got %+v", res[2])
	}
	if script.Calls() != 1 || len(ce.Response.Calls) != 1 {
		t.Fatalf("%d model calls after a cancel", script.Calls())
	}
}

// A run cancelled while it waits for approval denies the pending calls and
// runs none of the others.
func TestCancelWhileAwaitingApproval(t *testing.T) {
	var removed atomic.Int64
	script := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("a1", "rm", `{"text":"x"}`), modeltest.Call("e1", "echo", `{"text":"hi"}`)), modeltest.Text("never"))
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: guarded(t, &removed)}
	env := newEnv(t, reg)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Hour)
	env.ExecuteWorkflow(WorkflowName, Input{Model: "m", Tools: []string{"rm", "echo"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(3)}})
	var ce *CancelledError
	if err := decodeError(env.GetWorkflowError()); !errors.As(err, &ce) {
		t.Fatalf("error %v, want *CancelledError", err)
	}
	msgs := ce.Response.Messages
	if err := llm.CheckHistory(msgs); err != nil {
		t.Fatal(err)
	}
	res := msgs[len(msgs)-1].ToolResults()
	if removed.Load() != 0 || len(res) != 2 || !strings.HasPrefix(res[0].Content, run.DeniedPrefix) || res[1].Content != NotRun {
		t.Fatalf("removed %d, results %+v", removed.Load(), res)
	}
}

// A run cancelled while the model is called ends with the history as it
// was: nothing is open.
func TestCancelDuringModelCall(t *testing.T) {
	slow := modeltest.Text("late")
	slow.Delay = 30 * time.Second
	script := modeltest.NewScript(slow)
	reg := Registry{Models: map[string]model.Model{"m": script}}
	env := newEnv(t, reg)
	env.SetOnActivityStartedListener(func(info *activityInfo, _ context.Context, _ encodedValues) {
		if info.ActivityType.Name == ActivityModel {
			go env.CancelWorkflow()
		}
	})
	start := time.Now()
	env.ExecuteWorkflow(WorkflowName, Input{Model: "m", Run: run.Config{Prompt: llm.UserText("hi")}})
	var ce *CancelledError
	if err := decodeError(env.GetWorkflowError()); !errors.As(err, &ce) {
		t.Fatalf("error %v, want *CancelledError", err)
	}
	if len(ce.Response.Messages) != 1 || ce.Response.Messages[0].Text() != "hi" {
		t.Fatalf("messages %+v", ce.Response.Messages)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatal("the cancel waited for the model call to end")
	}
}
