package temporal

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
)

// List shows the runs on the server with their status, model and prompt
// line: one finished, one waiting for approval.
func TestServerList(t *testing.T) {
	c := serverClient(t)
	ctx := testContext(t, time.Minute)
	queue := queueName(t)
	var removed atomic.Int64
	script := modeltest.NewScript(modeltest.Text("hello"), modeltest.ToolCalls(modeltest.Call("a1", "rm", `{"text":"x"}`)))
	startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": script}, Tools: guarded(t, &removed)})

	long := strings.Repeat("é", MaxPromptLine)
	done, err := Start(ctx, c, Input{Model: "m", Run: run.Config{Prompt: llm.UserText("say hello\nand nothing else")}, Options: fastOptions()}, client.StartWorkflowOptions{TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := done.Result(ctx); err != nil {
		t.Fatal(err)
	}
	waiting, err := Start(ctx, c, Input{Model: "m", Tools: []string{"rm"}, Run: run.Config{Prompt: llm.UserText(long), MaxTurns: run.Turns(3)}, Options: fastOptions()},
		client.StartWorkflowOptions{TaskQueue: queue, Memo: map[string]any{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waiting.Cancel(testContext(t, 10*time.Second)) })

	// Visibility lags: wait until both show with the statuses expected.
	var got map[string]RunInfo
	deadline := time.Now().Add(20 * time.Second)
	for {
		all, err := List(ctx, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]RunInfo{}
		for _, r := range all {
			got[r.ID] = r
		}
		if got[done.WorkflowID].Status == "done" && got[waiting.WorkflowID].Status == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("List did not show both runs: %+v / %+v", got[done.WorkflowID], got[waiting.WorkflowID])
		}
		time.Sleep(100 * time.Millisecond)
	}
	d, w := got[done.WorkflowID], got[waiting.WorkflowID]
	if d.Model != "m" || d.Prompt != "say hello" || d.Started.IsZero() || d.Closed.Before(d.Started) {
		t.Errorf("the finished run: %+v", d)
	}
	if w.Model != "m" || len(w.Prompt) > MaxPromptLine || !strings.HasPrefix(long, w.Prompt) || len(w.Prompt) < MaxPromptLine-1 || !w.Closed.IsZero() {
		t.Errorf("the waiting run: %+v (prompt %d bytes)", w, len(w.Prompt))
	}
	if one, err := List(ctx, c, 1); err != nil || len(one) != 1 {
		t.Errorf("List with limit 1: %d runs, %v", len(one), err)
	}
}
