package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
)

// reference runs the harness straight through and returns its messages
// and the number of journal records it wrote.
func reference(t *testing.T) ([]llm.Message, int) {
	t.Helper()
	st := &countingStore{Store: store.NewMemory()}
	counter := filepath.Join(t.TempDir(), "counter")
	res, err := harnessAgent(st, harnessModel(""), counter, "", "w", 0).Run(context.Background(), agent.Prompt("go"))
	if err != nil {
		t.Fatal(err)
	}
	checkEffects(t, counter, nil)
	return res.Messages, st.appends()
}

func TestJournalRecordsEveryStep(t *testing.T) {
	st := store.NewMemory()
	counter := filepath.Join(t.TempDir(), "counter")
	if _, err := harnessAgent(st, harnessModel(""), counter, "", "w", 0).Run(context.Background(), agent.Prompt("go")); err != nil {
		t.Fatal(err)
	}
	recs, err := st.Load(context.Background(), harnessRunID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, string(r.Kind))
	}
	want := "run_created model_turn tool_intent tool_result tool_intent tool_result note " +
		"model_turn tool_intent tool_result tool_intent tool_result note model_turn run_finished"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("journal:\n got %s\nwant %s", got, want)
	}
	var created struct {
		store.RunHeader
		Format int `json:"format"`
	}
	if err := recs[0].Decode(&created); err != nil || created.Format != agent.JournalFormat || created.Prompt != "go" {
		t.Fatalf("run_created = %s (%v)", recs[0].Data, err)
	}
	var intent struct {
		Key string `json:"key"`
	}
	if err := recs[2].Decode(&intent); err != nil || intent.Key != "run_crash/1/c1" {
		t.Fatalf("intent = %s", recs[2].Data)
	}
	info, _ := st.Get(context.Background(), harnessRunID)
	if info.Status != store.StatusDone || info.Turns != 3 || info.Owner != "" {
		t.Fatalf("info = %+v", info)
	}
}

// A checkpoint write that fails stops the run at once with an explicit
// error; then the run resumes from what was saved, at every point, and
// ends as the straight run did, no destructive call taking effect twice.
func TestCheckpointFailureAtEveryStepThenResume(t *testing.T) {
	want, total := reference(t)
	for k := 1; k < total; k++ {
		t.Run(fmt.Sprint("after_", k), func(t *testing.T) {
			mem := store.NewMemory()
			st := &countingStore{Store: mem, failAfter: k}
			counter := filepath.Join(t.TempDir(), "counter")
			var evs []agent.Event
			_, err := harnessAgent(st, harnessModel(""), counter, "", "w1", 0).Run(context.Background(), agent.Input{
				Prompt: llm.UserText("go"), OnEvent: func(e agent.Event) { evs = append(evs, e) },
			})
			ce := mustAs[*agent.CheckpointError](t, err)
			if !errors.Is(err, errDiskFull) || !errors.Is(err, agent.ErrCheckpoint) || !strings.Contains(ce.Error(), "no space left") {
				t.Fatalf("err = %v", err)
			}
			if len(eventsOf[agent.Done](evs)) != 0 {
				t.Fatal("a run whose checkpoint failed reported done")
			}
			recs, _ := mem.Load(context.Background(), harnessRunID, 0)
			if len(recs) != k {
				t.Fatalf("%d records saved, want %d", len(recs), k)
			}
			// Another process (another agent, owner) resumes from the store.
			res, err := harnessAgent(mem, harnessModel(""), counter, "", "w2", 0).Resume(context.Background(), agent.Resumption{RunID: harnessRunID})
			if err != nil {
				t.Fatal(err)
			}
			checkEffects(t, counter, checkTranscript(t, res.Messages, want))
		})
	}
}

// A tool call recorded as started but not finished: re-run if its tool is
// read-only, otherwise answered as interrupted. Here both calls of the
// second round had started.
func TestResumeRerunsOnlySafeCalls(t *testing.T) {
	want, _ := reference(t)
	mem := store.NewMemory()
	counter := filepath.Join(t.TempDir(), "counter")
	// Fail the first write after both intents of round 2 are saved:
	// run_created, turn, 2x(intent, result), note, turn, intent c3 = 9; the
	// write of c3 runs, its result is lost; c4 never starts. Stop at 9 and
	// add c4's intent by hand, as if it had started in parallel.
	st := &countingStore{Store: mem, failAfter: 9}
	_, err := harnessAgent(st, harnessModel(""), counter, "", "w", 0).Run(context.Background(), agent.Prompt("go"))
	mustAs[*agent.CheckpointError](t, err)
	rec, _ := store.NewRecord(store.KindToolIntent, map[string]any{"turn": 2, "call": call("c4", "read", "b"), "key": "run_crash/2/c4"})
	if _, err := mem.Append(context.Background(), harnessRunID, 9, rec); err != nil {
		t.Fatal(err)
	}
	var evs []agent.Event
	res, err := harnessAgent(mem, harnessModel(""), counter, "", "w", 0).Resume(context.Background(), agent.Resumption{RunID: harnessRunID, OnEvent: func(e agent.Event) { evs = append(evs, e) }})
	if err != nil {
		t.Fatal(err)
	}
	interrupted := checkTranscript(t, res.Messages, want)
	if !reflect.DeepEqual(interrupted, []string{"c3"}) {
		t.Fatalf("interrupted %v, want [c3]", interrupted)
	}
	if n := effects(t, counter)["run_crash/2/c3"]; n != 1 {
		t.Fatalf("c3 took effect %d times", n)
	}
	if rs := eventsOf[agent.RunStarted](evs); len(rs) != 1 || !rs[0].Resumed {
		t.Fatalf("events = %s", types(evs))
	}
}

func TestResumeOfAFinishedRunReturnsItsResult(t *testing.T) {
	mem := store.NewMemory()
	counter := filepath.Join(t.TempDir(), "counter")
	a := harnessAgent(mem, harnessModel(""), counter, "", "w", 0)
	first, err := a.Run(context.Background(), agent.Input{Prompt: llm.UserText("go"), ConversationID: "conv"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.Resume(context.Background(), agent.Resumption{RunID: harnessRunID})
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := json.Marshal(first)
	b2, _ := json.Marshal(again)
	if string(b1) != string(b2) {
		t.Fatalf("resumed result differs:\n%s\n%s", b1, b2)
	}
	checkEffects(t, counter, nil)
	h, _ := mem.History(context.Background(), "conv")
	if len(h) != len(first.Messages) {
		t.Fatalf("conversation has %d messages, want %d (appended once)", len(h), len(first.Messages))
	}
}

func TestResumeOfAFailedRunIsRefused(t *testing.T) {
	mem := store.NewMemory()
	m := modeltest.NewScript(modeltest.ToolCalls(call("c1", "nope", "x")))
	a := agent.New(agent.Config{Model: m, Tools: set(t, addTool()), Store: mem, MaxInvalidRetries: agent.Limit(0), NewID: func() string { return "r1" }})
	if _, err := a.Run(context.Background(), agent.Prompt("go")); !errors.Is(err, run.ErrUnknownTool) {
		t.Fatalf("err = %v", err)
	}
	info, _ := mem.Get(context.Background(), "r1")
	if info.Status != store.StatusFailed || !strings.Contains(info.Error, "nope") {
		t.Fatalf("info = %+v", info)
	}
	_, err := a.Resume(context.Background(), agent.Resumption{RunID: "r1"})
	if !errors.Is(err, agent.ErrResume) || !strings.Contains(err.Error(), "the run failed") {
		t.Fatalf("err = %v", err)
	}
	if _, err := a.Resume(context.Background(), agent.Resumption{RunID: "missing"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
	// Another agent config cannot resume the run.
	other := agent.New(agent.Config{Model: m, Tools: set(t, addTool()), Store: mem, System: "changed"})
	mem2 := store.NewMemory()
	_ = mem2
	if _, err := other.Resume(context.Background(), agent.Resumption{RunID: "r1"}); !errors.Is(err, agent.ErrResume) {
		t.Fatalf("err = %v", err)
	}
}

// Two resumers of one run: the second finds it claimed and proceeds no
// further.
func TestTwoResumersExactlyOneProceeds(t *testing.T) {
	mem := store.NewMemory()
	counter := filepath.Join(t.TempDir(), "counter")
	st := &countingStore{Store: mem, failAfter: 4}
	_, err := harnessAgent(st, harnessModel(""), counter, "", "w", 0).Run(context.Background(), agent.Prompt("go"))
	mustAs[*agent.CheckpointError](t, err)

	gate := filepath.Join(t.TempDir(), "gate")
	first := harnessAgent(mem, harnessModel(gate), counter, "", "r1", time.Minute)
	second := harnessAgent(mem, harnessModel(""), counter, "", "r2", time.Minute)
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		_, err := first.Resume(context.Background(), agent.Resumption{RunID: harnessRunID, OnEvent: func(e agent.Event) {
			if _, ok := e.(agent.RunStarted); ok {
				close(started)
			}
		}})
		done <- err
	}()
	<-started
	_, err = second.Resume(context.Background(), agent.Resumption{RunID: harnessRunID})
	if !errors.Is(err, store.ErrClaimed) || !errors.Is(err, agent.ErrResume) {
		t.Fatalf("second resumer: %v", err)
	}
	writeFile(t, gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkEffects(t, counter, nil)
}
