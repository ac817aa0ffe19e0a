package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// finishedJournal runs a tool round and a final answer with a store and
// returns its records.
func finishedJournal(t *testing.T) []store.Record {
	t.Helper()
	mem := store.NewMemory()
	m := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("c1", "add", `{"a":1,"b":2}`)), modeltest.Text("3"))
	a := agent.New(agent.Config{Model: m, Store: mem, Tools: set(t, addTool()), NewID: func() string { return "r1" }})
	if _, err := a.Run(context.Background(), agent.Prompt("1+2?")); err != nil {
		t.Fatal(err)
	}
	recs, err := mem.Load(context.Background(), "r1", 0)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// addMember returns the JSON object doc with member name added to the
// object at the path (member names, from the top).
func addMember(t *testing.T, doc []byte, name string, path ...string) []byte {
	t.Helper()
	var top map[string]any
	if err := json.Unmarshal(doc, &top); err != nil {
		t.Fatal(err)
	}
	obj := top
	for _, p := range path {
		next, ok := obj[p].(map[string]any)
		if !ok {
			t.Fatalf("%s has no object at %v", doc, path)
		}
		obj = next
	}
	obj[name] = 1
	b, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A journal record whose data holds a member this build does not know is
// refused on resume, naming the record, the member and the journal format
// this build reads; nothing is driven.
func TestResumeRefusesAnUnknownMemberInARecord(t *testing.T) {
	recs := finishedJournal(t)
	type place struct {
		seq  int64
		path []string
		says string
	}
	var places []place
	for _, r := range recs {
		places = append(places, place{seq: r.Seq})
	}
	places = append(places,
		place{seq: 1, path: []string{"config"}},
		place{seq: 2, path: []string{"response"}},
		place{seq: 2, path: []string{"response", "message"}, says: "(in llm: message"},
		place{seq: 3, path: []string{"call"}},
		place{seq: 4, path: []string{"result"}},
	)
	for _, p := range places {
		r := recs[p.seq-1]
		name := fmt.Sprintf("%d_%s/%s", r.Seq, r.Kind, strings.Join(p.path, "/"))
		t.Run(name, func(t *testing.T) {
			bad := append([]store.Record(nil), recs...)
			bad[p.seq-1].Data = addMember(t, r.Data, "zz_added_later", p.path...)
			mem := store.NewMemory()
			if _, err := mem.Append(context.Background(), "r1", 0, bad...); err != nil {
				t.Fatal(err)
			}
			m := modeltest.NewScript(modeltest.Text("unused"), modeltest.Text("unused"))
			a := agent.New(agent.Config{Model: m, Store: mem, Tools: set(t, addTool())})
			_, err := a.Resume(context.Background(), agent.Resumption{RunID: "r1"})
			mustAs[*agent.ResumeError](t, err)
			for _, w := range []string{fmt.Sprintf("record %d (%s)", r.Seq, r.Kind), `"zz_added_later"`, "journal format 1", p.says} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if m.Calls() != 0 {
				t.Fatal("the model was called")
			}
			if info, _ := mem.Get(context.Background(), "r1"); info.Owner != "" {
				t.Fatalf("the run is still claimed by %q", info.Owner)
			}
		})
	}
	// The journal as written resumes (to its result).
	mem := store.NewMemory()
	mem.Append(context.Background(), "r1", 0, recs...)
	a := agent.New(agent.Config{Model: modeltest.NewScript(), Store: mem, Tools: set(t, addTool())})
	if res, err := a.Resume(context.Background(), agent.Resumption{RunID: "r1"}); err != nil || res.Output != "3" {
		t.Fatalf("Resume = %q, %v", res.Output, err)
	}
}

// A journal of another format is refused for its format, before its
// members are looked at.
func TestResumeNamesTheFormatBeforeMembers(t *testing.T) {
	recs := finishedJournal(t)
	recs[0].Data = addMember(t, []byte(strings.Replace(string(recs[0].Data), `"format":1`, `"format":2`, 1)), "zz_added_later")
	mem := store.NewMemory()
	mem.Append(context.Background(), "r1", 0, recs...)
	a := agent.New(agent.Config{Model: modeltest.NewScript(), Store: mem, Tools: set(t, addTool())})
	_, err := a.Resume(context.Background(), agent.Resumption{RunID: "r1"})
	if !errors.Is(err, agent.ErrResume) || !strings.Contains(err.Error(), "journal is format 2; this build reads format 1") || strings.Contains(err.Error(), "zz_added_later") {
		t.Fatalf("Resume = %v", err)
	}
}

// An agent snapshot with a member this build does not know, at its top
// level or in its ledger, is refused naming the member and the snapshot
// format this build reads.
func TestResumeRefusesAnUnknownMemberInASnapshot(t *testing.T) {
	cfg := func(m *modeltest.Script) agent.Config { return agent.Config{Model: m} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := agent.New(cfg(modeltest.NewScript(modeltest.Text("hi")))).Run(ctx, agent.Input{Prompt: llm.UserText("hello"), OnEvent: func(e agent.Event) {
		if _, ok := e.(agent.Usage); ok {
			cancel()
		}
	}})
	snap := mustAs[*agent.RunError](t, err).Snapshot
	if snap == nil {
		t.Fatalf("Run = %v, without a snapshot", err)
	}
	for _, path := range [][]string{nil, {"ledger"}} {
		m := modeltest.NewScript()
		_, err := agent.New(cfg(m)).Resume(context.Background(), agent.Resumption{Snapshot: addMember(t, snap, "zz_added_later", path...)})
		mustAs[*agent.ResumeError](t, err)
		for _, w := range []string{`"zz_added_later"`, "snapshot format 1"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("at %v: %q does not say %q", path, err, w)
			}
		}
	}
	res, err := agent.New(cfg(modeltest.NewScript())).Resume(context.Background(), agent.Resumption{Snapshot: snap})
	if err != nil || res.Output != "hi" {
		t.Fatalf("the snapshot as written: Resume = %q, %v", res.Output, err)
	}
}
