package runstate_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
)

func resumeSnapshot(t *testing.T, name string, ans *answers, s setup, ds []run.Decision) (*world, agent.Result, error) {
	t.Helper()
	w := &world{}
	a := newAgent(t, w, ans, nil, newClock(time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC)), s)
	doc := read(t, filepath.Join(agentFixtures, name+".json"))
	res, err := a.Resume(context.Background(), agent.Resumption{Snapshot: doc, Decisions: ds})
	return w, res, err
}

// A run suspended for approval, handed out as a snapshot, resumes with
// the decisions in another process.
func TestSuspendedSnapshotResumes(t *testing.T) {
	ans := newAnswers()
	ans.turns[2] = text(usage(1, 1), "deleted both")
	ds := []run.Decision{{CallID: "c1", Action: run.Approved}, {CallID: "c2", Action: run.Edited, Arguments: `{"path":"dist/cache"}`}}
	w, res, err := resumeSnapshot(t, "suspended", ans, setup{approver: suspend}, ds)
	if err != nil || res.Output != "deleted both" || res.RunID != "run_suspended" {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	want := []execution{
		{Tool: "delete_file", Args: `{"path":"build"}`, Key: "run_suspended/1/c1"},
		{Tool: "delete_file", Args: `{"path":"dist/cache"}`, Key: "run_suspended/1/c2"},
	}
	if got := w.executions(); !reflect.DeepEqual(got, want) {
		t.Fatalf("executions %+v, want %+v", got, want)
	}
	if got := ans.calls(); !reflect.DeepEqual(got, []int{2}) {
		t.Fatalf("model turns %v", got)
	}
	// Without decisions it suspends again, with a snapshot of its own.
	_, _, err = resumeSnapshot(t, "suspended", newAnswers(), setup{approver: suspend}, nil)
	var se *agent.SuspendedError
	if !errors.As(err, &se) || len(se.Snapshot) == 0 {
		t.Fatalf("Resume without decisions = %v", err)
	}
	if err := validate(t, schemaAgent, se.Snapshot); err != nil {
		t.Fatalf("the new snapshot: %v", err)
	}
}

// A run cancelled in the middle of a tool resumes after the interrupted
// batch: nothing runs again, and the model sees every call answered.
func TestCancelledSnapshotResumes(t *testing.T) {
	ans := newAnswers()
	ans.turns[2] = text(usage(1, 1), "stopped")
	w, res, err := resumeSnapshot(t, "cancelled", ans, setup{approver: agent.AllowAll}, nil)
	if err != nil || res.Output != "stopped" {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	if got := w.executions(); len(got) != 0 {
		t.Fatalf("executions on resume: %+v", got)
	}
	req, _ := ans.request(2)
	if err := llm.CheckHistory(req.Messages); err != nil {
		t.Fatal(err)
	}
	rs := lastResults(req.Messages)
	if len(rs) != 3 || rs[1].Content != agent.Interrupted || rs[2].Content != agent.NotStarted {
		t.Fatalf("results sent = %+v", rs)
	}
}
