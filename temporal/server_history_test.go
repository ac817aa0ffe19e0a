package temporal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
)

// runHistories returns the histories of every run of workflow id, from
// the first run on, following continue-as-new.
func runHistories(t *testing.T, c client.Client, id, firstRun string) []*historypb.History {
	t.Helper()
	var out []*historypb.History
	for runID := firstRun; runID != ""; {
		h := &historypb.History{}
		next := ""
		it := c.GetWorkflowHistory(testContext(t, 30*time.Second), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			h.Events = append(h.Events, e)
			if a := e.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		out = append(out, h)
		runID = next
	}
	return out
}

// ADVERSARIAL 73 on a real server: 200 turns with 5 KB tool results. The
// server's own histories are measured: no event (so no payload) over 2 MB,
// each run's history under 10 MB, and all runs together too.
func TestServerBoundedHistory200Turns(t *testing.T) {
	if testing.Short() {
		t.Skip("200 turns")
	}
	c := serverClient(t)
	ctx := testContext(t, 3*time.Minute)
	queue := queueName(t)
	blobs, err := NewDirBlobs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const turns = 200
	var calls atomic.Int64
	startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": bulkModel(turns, &calls)}, Tools: mustSet(t, bulkTool(5000)), Blobs: blobs})
	opts := fastOptions()
	opts.HistoryEvents = 1000
	opts.InlineCarryBytes = 256 << 10
	in := Input{Model: "m", Tools: []string{"bulk"}, Run: run.Config{Prompt: llm.UserText("read it all"), MaxTurns: run.Turns(turns + 1)}, Options: opts}
	wr, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, WorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := Attach(c, wr.GetID()).Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Output != "that was a lot" || len(resp.Messages) != 2*turns+2 || calls.Load() != turns+1 {
		t.Fatalf("output %q, %d messages, %d model calls", resp.Output, len(resp.Messages), calls.Load())
	}
	hists := runHistories(t, c, wr.GetID(), wr.GetRunID())
	if len(hists) < 2 {
		t.Fatalf("%d runs: continue-as-new was not exercised", len(hists))
	}
	var all int
	for i, h := range hists {
		size, biggest := 0, 0
		for _, e := range h.Events {
			n := proto.Size(e)
			size += n
			biggest = max(biggest, n)
		}
		all += size
		t.Logf("run %d: %d events, %d bytes, largest event %d bytes", i+1, len(h.Events), size, biggest)
		if biggest > 2<<20 {
			t.Errorf("run %d has an event of %d bytes, over 2 MiB", i+1, biggest)
		}
		if size > 10<<20 {
			t.Errorf("run %d's history is %d bytes, over 10 MiB", i+1, size)
		}
	}
	t.Logf("%d runs, %d bytes of history in all", len(hists), all)
	if all > 10<<20 {
		t.Errorf("the histories of all runs hold %d bytes, over 10 MiB", all)
	}
}

// writeHistories writes the histories of every run of workflow id to
// testdata/replay/NAME-runN.json.
func writeHistories(t *testing.T, c client.Client, name, id, runID string) {
	t.Helper()
	dir := filepath.Join("testdata", "replay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, h := range runHistories(t, c, id, runID) {
		data, err := temporalproto.CustomJSONMarshalOptions{Indent: " "}.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, fmt.Sprintf("%s-run%d.json", name, i+1))
		if err := os.WriteFile(file, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServerRecordHistories writes the histories replayed by TestReplay
// (testdata/replay) from runs on a real server. It runs only with
// LOOM_RECORD_HISTORY=1: recorded histories are kept, so that a change of
// the workflow code that breaks their replay is caught (ADVERSARIAL 72).
func TestServerRecordHistories(t *testing.T) {
	if os.Getenv("LOOM_RECORD_HISTORY") != "1" {
		t.Skip("set LOOM_RECORD_HISTORY=1 (with a server) to record the histories in testdata/replay")
	}
	c := serverClient(t)
	ctx := testContext(t, time.Minute)
	write := func(name string, id, runID string) { writeHistories(t, c, name, id, runID) }

	// Tools in parallel and in sequence, an approval, a repaired name.
	queue := queueName(t)
	var removed atomic.Int64
	script := modeltest.NewScript(parityTurns()...)
	startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": script}, Tools: guarded(t, &removed)})
	in := Input{Model: "m", Tools: []string{"rm", "echo"}, Run: run.Config{System: "sys", Prompt: llm.UserText("tidy up"), MaxTurns: run.Turns(5)}, Options: fastOptions()}
	wr, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, WorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	h := Attach(c, wr.GetID())
	waitState(t, h, run.StateAwaitingApproval, 2)
	if _, err := h.Approve(ctx, []run.Decision{{CallID: "a1", Action: run.Approved}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Result(ctx); err != nil {
		t.Fatal(err)
	}
	write("tools-approval", wr.GetID(), wr.GetRunID())

	// Continue-as-new by reference, then a cancellation during a tool.
	queue = queueName(t)
	blobs, err := NewDirBlobs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": bulkModel(4, &calls)}, Tools: mustSet(t, bulkTool(600)), Blobs: blobs})
	opts := fastOptions()
	opts.TurnsPerRun, opts.InlineCarryBytes = 2, 1
	wr, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, WorkflowName, Input{Model: "m", Tools: []string{"bulk"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(5)}, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Attach(c, wr.GetID()).Result(ctx); err != nil {
		t.Fatal(err)
	}
	write("continue-as-new", wr.GetID(), wr.GetRunID())

	// A cancellation while a tool runs.
	queue = queueName(t)
	started := make(chan string, 2)
	tools := mustSet(t, echoTool("echo", llm.EffectReadOnly), blocker("deploy", llm.EffectDestructive, started))
	script = modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("r1", "echo", `{"text":"a"}`), modeltest.Call("w1", "deploy", `{"text":"prod"}`), modeltest.Call("w2", "deploy", `{"text":"dev"}`)))
	startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": script}, Tools: tools})
	wr, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, WorkflowName, Input{Model: "m", Tools: []string{"echo", "deploy"}, Run: run.Config{Prompt: llm.UserText("ship"), MaxTurns: run.Turns(3)}, Options: fastOptions()})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := c.CancelWorkflow(ctx, wr.GetID(), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := Attach(c, wr.GetID()).Result(ctx); !errors.Is(err, ErrCancelled) {
		t.Fatalf("cancelled run: %v", err)
	}
	write("cancel", wr.GetID(), wr.GetRunID())
}
