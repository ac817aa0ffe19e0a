package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/store"
)

func weatherSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	s, err := jsonschema.For[weather](nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A journal that ends at a final answer the output schema refuses (the
// process died before the re-prompt was recorded) resumes to the re-prompt
// the uninterrupted run made, not to a result holding that answer.
func TestResumeRechecksARecordedFinalAnswer(t *testing.T) {
	const good = `{"city":"Paris","celsius":25}`
	cfg := func(m *modeltest.Script, s store.Store) agent.Config {
		return agent.Config{Model: m, Store: s, OutputSchema: weatherSchema(t), MaxTurns: agent.Limit(3),
			NewID: func() string { return "r1" }}
	}
	straight := modeltest.NewScript(modeltest.Text("not json"), modeltest.Text(good))
	want, err := agent.New(cfg(straight, store.NewMemory())).Run(context.Background(), agent.Prompt("weather?"))
	if err != nil {
		t.Fatal(err)
	}

	// run_created and the first model turn are saved; the re-prompt's note is not.
	mem := store.NewMemory()
	first := modeltest.NewScript(modeltest.Text("not json"))
	_, err = agent.New(cfg(first, &countingStore{Store: mem, failAfter: 2})).Run(context.Background(), agent.Prompt("weather?"))
	if !errors.Is(err, agent.ErrCheckpoint) {
		t.Fatalf("Run = %v, want a checkpoint error", err)
	}
	recs, _ := mem.Load(context.Background(), "r1", 0)
	if len(recs) != 2 || recs[1].Kind != store.KindModelTurn {
		t.Fatalf("journal holds %d records", len(recs))
	}

	second := modeltest.NewScript(modeltest.Text(good))
	var evs []agent.Event
	res, err := agent.New(cfg(second, mem)).Resume(context.Background(), agent.Resumption{RunID: "r1", OnEvent: func(e agent.Event) { evs = append(evs, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != good || second.Calls() != 1 {
		t.Fatalf("output %q after %d model calls, want %q after 1", res.Output, second.Calls(), good)
	}
	got, _ := json.Marshal(res.Messages)
	wantMsgs, _ := json.Marshal(want.Messages)
	if string(got) != string(wantMsgs) {
		t.Fatalf("messages differ from the uninterrupted run:\n got %s\nwant %s", got, wantMsgs)
	}
	notes := eventsOf[agent.Note](evs)
	if len(notes) != 1 || notes[0].Reason != "output" || !strings.Contains(notes[0].Text, "does not match the required output schema") {
		t.Fatalf("notes = %+v", notes)
	}
	if got := types(evs); !strings.HasPrefix(got, "run_started note ") {
		t.Fatalf("events: %s", got)
	}
	recs, _ = mem.Load(context.Background(), "r1", 0)
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, string(r.Kind))
	}
	if got := strings.Join(kinds, " "); got != "run_created model_turn note model_turn run_finished" {
		t.Fatalf("journal: %s", got)
	}
}

// A final answer the schema refuses on the last allowed turn fails the
// run with *OutputError; a resumed run at that answer (its failure not
// recorded) fails the same way, from a journal and from a snapshot.
func TestResumeFailsARefusedLastAnswer(t *testing.T) {
	t.Run("journal", func(t *testing.T) {
		mem := store.NewMemory()
		cfg := func(m *modeltest.Script, s store.Store) agent.Config {
			return agent.Config{Model: m, Store: s, OutputSchema: weatherSchema(t), MaxTurns: agent.Limit(1),
				NewID: func() string { return "r1" }}
		}
		// The run_failed record is lost.
		first := modeltest.NewScript(modeltest.Text("not json"))
		_, err := agent.New(cfg(first, &countingStore{Store: mem, failAfter: 2})).Run(context.Background(), agent.Prompt("weather?"))
		mustAs[*agent.OutputError](t, err)
		if info, _ := mem.Get(context.Background(), "r1"); info.Status == store.StatusFailed {
			t.Fatal("the failure was recorded")
		}
		second := modeltest.NewScript()
		_, err = agent.New(cfg(second, mem)).Resume(context.Background(), agent.Resumption{RunID: "r1"})
		oe := mustAs[*agent.OutputError](t, err)
		if oe.Output != "not json" || !errors.Is(err, agent.ErrOutput) || second.Calls() != 0 {
			t.Fatalf("Resume = %v after %d model calls", err, second.Calls())
		}
		info, _ := mem.Get(context.Background(), "r1")
		if info.Status != store.StatusFailed || !strings.Contains(info.Error, "does not match the output schema") {
			t.Fatalf("info = %+v", info)
		}
	})
	t.Run("snapshot", func(t *testing.T) {
		cfg := func(m *modeltest.Script) agent.Config {
			return agent.Config{Model: m, OutputSchema: weatherSchema(t), MaxTurns: agent.Limit(1)}
		}
		// Cancelled once the answer is in: the snapshot holds it unanswered.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		first := modeltest.NewScript(modeltest.Text("not json"))
		_, err := agent.New(cfg(first)).Run(ctx, agent.Input{Prompt: llm.UserText("weather?"), OnEvent: func(e agent.Event) {
			if _, ok := e.(agent.Usage); ok {
				cancel()
			}
		}})
		re := mustAs[*agent.RunError](t, err)
		if !errors.Is(err, context.Canceled) || re.Snapshot == nil {
			t.Fatalf("Run = %v (snapshot %t)", err, re.Snapshot != nil)
		}
		second := modeltest.NewScript(modeltest.Text("unused"))
		_, err = agent.New(cfg(second)).Resume(context.Background(), agent.Resumption{Snapshot: re.Snapshot})
		oe := mustAs[*agent.OutputError](t, err)
		if oe.Output != "not json" || second.Calls() != 0 {
			t.Fatalf("Resume = %v after %d model calls", err, second.Calls())
		}
	})
}
