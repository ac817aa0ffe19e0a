package runstate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
	"github.com/loomkit/loom/store"
)

// -generate writes the fixtures that do not exist yet. It never
// overwrites one: a fixture of format 1 is frozen once committed.
var generate = flag.Bool("generate", false, "write missing format 1 fixtures to testdata (never overwrites)")

// writeNew writes a fixture unless it exists.
func writeNew(t *testing.T, path string, data []byte) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		t.Logf("%s exists; left as it is", path)
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

func TestGenerateFixtures(t *testing.T) {
	if !*generate {
		t.Skip("run with -generate to write missing fixtures")
	}
	for _, s := range scenarios {
		var b bytes.Buffer
		if err := store.WriteJournal(&b, recordScenario(t, s)); err != nil {
			t.Fatal(err)
		}
		writeNew(t, filepath.Join(journalFixtures, s.name+".jsonl"), b.Bytes())
	}
	for name, doc := range agentSnapshots(t) {
		writeNew(t, filepath.Join(agentFixtures, name+".json"), indent(t, doc))
	}
	for name, r := range machineSnapshots(t) {
		doc, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		writeNew(t, filepath.Join(snapshotFixtures, name+".json"), indent(t, doc))
	}
}

func indent(t *testing.T, doc []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, doc, "", "  "); err != nil {
		t.Fatal(err)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// recordScenario runs a scenario against a journaling agent and returns
// its journal (cut where the scenario crashes).
func recordScenario(t *testing.T, s scenario) []store.Record {
	t.Helper()
	c := newClock(s.start)
	st := timedStore{Store: store.NewMemory(), clock: c}
	w := &world{}
	ans := newAnswers(s.turns...)
	a := newAgent(t, w, ans, st, c, s.setup)
	ctx := context.Background()
	_, err := a.Run(ctx, agent.Input{Prompt: llm.UserText(s.prompt), RunID: s.runID(), ConversationID: s.conv, History: s.history})
	var se *agent.SuspendedError
	if errors.As(err, &se) && s.decisions != nil {
		_, err = a.Resume(ctx, agent.Resumption{RunID: s.runID(), Decisions: s.decisions})
	}
	t.Logf("%s: run ended with %v", s.name, err)
	recs, lerr := st.Load(ctx, s.runID(), 0)
	if lerr != nil {
		t.Fatal(lerr)
	}
	if s.cutAfter == "" {
		return recs
	}
	for i, r := range recs {
		if r.Kind != store.KindToolIntent {
			continue
		}
		var in struct {
			Call llm.ToolCall `json:"call"`
		}
		if err := r.Decode(&in); err != nil {
			t.Fatal(err)
		}
		if in.Call.ID == s.cutAfter {
			return recs[:i+1]
		}
	}
	t.Fatalf("%s: no intent of %s", s.name, s.cutAfter)
	return nil
}

// agentSnapshots returns the snapshots an agent without a store hands
// out: suspended for approval, and cancelled in the middle of a tool.
func agentSnapshots(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	ctx := context.Background()

	s := scenarioNamed(t, "waiting_approval")
	a := newAgent(t, &world{}, newAnswers(s.turns...), nil, newClock(s.start), s.setup)
	_, err := a.Run(ctx, agent.Input{Prompt: llm.UserText(s.prompt), RunID: "run_suspended"})
	var se *agent.SuspendedError
	if !errors.As(err, &se) {
		t.Fatalf("suspended: %v", err)
	}
	out["suspended"] = se.Snapshot

	w := &world{}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.stop = cancel
	a = newAgent(t, w, newAnswers(
		toolCalls(usage(220, 30),
			modeltest.Call("c1", "read_file", `{"path":"go.mod"}`),
			modeltest.Call("c2", "delete_file", `{"path":"build","text":"cancel"}`),
			modeltest.Call("c3", "upsert_note", `{"key":"k","text":"v"}`)),
	), nil, newClock(time.Date(2026, 3, 8, 18, 0, 0, 0, time.UTC)), setup{approver: agent.AllowAll})
	_, err = a.Run(cctx, agent.Input{Prompt: llm.UserText("Clean the build directory, then note it."), RunID: "run_cancelled"})
	var re *agent.RunError
	if !errors.As(err, &re) || re.Snapshot == nil {
		t.Fatalf("cancelled: %v", err)
	}
	out["cancelled"] = re.Snapshot
	return out
}

func prompt(s string) llm.Message { return llm.UserText(s) }

// machineSnapshots returns runs in states and with members the golden
// snapshots of package run do not show.
func machineSnapshots(t *testing.T) map[string]*run.Run {
	out := map[string]*run.Run{}
	step := func(r *run.Run) run.Step {
		t.Helper()
		s, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	search := llm.ToolSpec{Name: "search", Description: "Search the code.", Effect: llm.EffectReadOnly, Schema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
	save := llm.ToolSpec{Name: "save", Description: "Save a note.", Effect: llm.EffectIdempotent}

	// A final, tool-free call awaited after an invalid call was retried,
	// with every sampling member and an image in the prompt.
	temp, topP := 0.2, 0.9
	r := run.New(run.Config{
		Model:  "test-model",
		System: "Answer in JSON.",
		Prompt: llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
			llm.Text{Text: "What does this diagram show?"},
			llm.Image{Data: []byte("\x89PNG\r\n"), MediaType: "image/png"},
			llm.Image{URL: "https://example.com/legend.png"},
		}},
		Tools:             []llm.ToolSpec{search, save},
		ToolChoice:        llm.ChooseTools("search"),
		MaxTurns:          run.Turns(2),
		MaxInvalidRetries: 1,
		GracefulLastTurn:  true,
		MaxTokens:         256,
		Temperature:       &temp,
		TopP:              &topP,
		Stop:              []string{"</answer>"},
		Schema:            &llm.OutputShape{Name: "answer", Schema: json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}`)},
	})
	step(r)
	resp := runtest.Answer(llm.Thinking{Redacted: "ZW5jcnlwdGVk"}, llm.ToolCall{ID: "toolu_1", Name: "serch", Arguments: `{"q":"diagram"}`})
	resp.Usage = llm.Usage{InputTokens: 900, OutputTokens: 40, CacheReadTokens: 600, CacheWriteTokens: 200, ReasoningTokens: 12}
	resp.ID, resp.Model, resp.RequestID = "msg_1", "test-model-2026", "req_1"
	must(r.ModelResponse(resp))
	step(r) // ResolveToolCall
	must(r.Resolve(run.Retry{Feedback: "There is no tool serch; call search."}))
	if cm, ok := step(r).(run.CallModel); !ok || !cm.Final {
		t.Fatalf("want a final call, got %#v", cm)
	}
	out["awaiting_final_call"] = r

	// A turn whose invalid call was skipped: every call answered, none to run.
	r = run.New(run.Config{Prompt: prompt("Find the TODOs."), Tools: []llm.ToolSpec{search, save}, MaxTurns: run.Turns(3)})
	step(r)
	must(r.ModelResponse(runtest.Answer(
		llm.ToolCall{ID: "c1", Name: "search", Arguments: `{"q":"TODO"}`},
		llm.ToolCall{ID: "c2", Name: "grep", Arguments: `{"pattern":"TODO"}`})))
	step(r)
	must(r.Resolve(run.Skip{Reason: "There is no grep tool; use search."}))
	out["advancing_skipped"] = r

	// Tool calls awaiting results: ids minted for calls that had none or
	// repeated one (the provider's kept), arguments that are not JSON
	// (answered already), and an edited approval.
	r = run.New(run.Config{Prompt: prompt("Search twice and save."), Tools: []llm.ToolSpec{search, save}, MaxTurns: run.Turns(3)})
	step(r)
	resp = runtest.Answer(
		llm.ToolCall{Name: "search", Arguments: `{"q":"a"}`},
		llm.ToolCall{ID: "dup", Name: "search", Arguments: `{"q":"b"}`},
		llm.ToolCall{ID: "dup", Name: "save", Arguments: `{"note":`},
		llm.ToolCall{ID: "c4", Name: "save", Arguments: ``})
	resp.Usage = llm.Usage{InputTokens: 120, OutputTokens: 60}
	must(r.ModelResponse(resp))
	if _, ok := step(r).(run.CallTools); !ok {
		t.Fatalf("want CallTools, state %s", r.State())
	}
	out["executing_minted_ids"] = r

	// Failures of every kind.
	r = run.New(run.Config{Prompt: prompt("Loop."), Tools: []llm.ToolSpec{search}, MaxTurns: run.Turns(1)})
	step(r)
	must(r.ModelResponse(runtest.Answer(llm.ToolCall{ID: "c1", Name: "search", Arguments: `{}`})))
	ct := step(r).(run.CallTools)
	must(r.ToolResults(runtest.Answers(ct.Calls, func(c llm.ToolCall) llm.ToolResult { return runtest.Result(c.ID, "nothing") })))
	if _, err := r.Next(); !errors.Is(err, run.ErrMaxTurns) {
		t.Fatalf("max turns: %v", err)
	}
	out["failed_max_turns"] = r

	r = run.New(run.Config{Prompt: prompt("Delete it."), Tools: []llm.ToolSpec{search}, MaxTurns: run.Turns(2)})
	step(r)
	must(r.ModelResponse(runtest.Answer(llm.ToolCall{ID: "c1", Name: "rm", Arguments: `{}`})))
	step(r)
	if err := r.Resolve(run.Stop{Reason: "the model asked for a tool that deletes files"}); err == nil && r.State() != run.StateFailed {
		t.Fatalf("stop: state %s", r.State())
	}
	out["failed_stopped"] = r

	r = run.New(run.Config{Prompt: prompt("Write an essay."), MaxTurns: run.Turns(1)})
	step(r)
	resp = llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Thinking{Text: "An essay needs"}}}, FinishReason: llm.FinishLength}
	must(r.ModelResponse(resp))
	if _, err := r.Next(); !errors.Is(err, run.ErrTruncated) {
		t.Fatalf("truncated: %v", err)
	}
	out["failed_truncated"] = r

	r = run.New(run.Config{Prompt: prompt("Anything."), ToolChoice: llm.ToolChoice{Mode: llm.ToolRequired}})
	if !errors.Is(r.Err(), run.ErrConfig) {
		t.Fatalf("config: %v", r.Err())
	}
	out["failed_config"] = r
	return out
}
