package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/tool"
)

type weather struct {
	City    string  `json:"city"`
	Celsius float64 `json:"celsius"`
	Note    string  `json:"note,omitempty"`
}

func TestRunAsValidatesAndReprompts(t *testing.T) {
	m := modeltest.NewScript(
		modeltest.Text(`{"city":"Paris"}`),                                  // missing celsius
		modeltest.Text("```json\n{\"city\":\"Paris\",\"celsius\":25}\n```"), // fenced: accepted
	)
	a := agent.New(agent.Config{Model: m})
	v, res, err := agent.RunAs[weather](context.Background(), a, agent.Prompt("weather?"))
	if err != nil {
		t.Fatal(err)
	}
	if v != (weather{City: "Paris", Celsius: 25}) || len(res.Calls) != 2 {
		t.Fatalf("value = %+v, calls %d", v, len(res.Calls))
	}
	reqs := m.Requests()
	if reqs[0].Schema == nil || !strings.Contains(string(reqs[0].Schema.Schema), `"celsius"`) {
		t.Fatalf("schema not requested: %+v", reqs[0].Schema)
	}
	fb := reqs[1].Messages[len(reqs[1].Messages)-1].Text()
	if !strings.Contains(fb, "does not match the required output schema") || !strings.Contains(fb, "celsius") {
		t.Fatalf("feedback = %q", fb)
	}
}

func TestOutputSchemaRunsOutOfTurns(t *testing.T) {
	m := modeltest.NewScript(modeltest.Text("not json"), modeltest.Text(`{"city":1}`))
	schema, err := jsonschema.For[weather](nil)
	if err != nil {
		t.Fatal(err)
	}
	a := agent.New(agent.Config{Model: m, OutputSchema: schema, MaxTurns: agent.Limit(2)})
	_, err = a.Run(context.Background(), agent.Prompt("weather?"))
	oe := mustAs[*agent.OutputError](t, err)
	if oe.Output != `{"city":1}` || !errors.Is(err, agent.ErrOutput) || m.Calls() != 2 {
		t.Fatalf("err = %v", err)
	}
	// RunAs of a type without a schema is a config error.
	_, _, err = agent.RunAs[chan int](context.Background(), a, agent.Prompt("x"))
	mustAs[*agent.ConfigError](t, err)
}

// Failures before any output are retried by model.Retry (Retrying events);
// a stream that fails after output is restarted (TurnRestarted), and its
// truncated answer never reaches the machine.
func TestRetriesAndRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		over := &model.Error{Kind: model.KindOverloaded, Message: "busy", RetryAfter: 2 * time.Second}
		cut := modeltest.Turn{Events: []llm.Event{llm.TextDelta{Text: "partial "}, llm.ToolCallStart{Index: 0, ID: "c1", Name: "add", Arguments: `{"a":`}}, CutAfter: 2}
		m := modeltest.NewScript(modeltest.Turn{Err: over}, cut, modeltest.Text("whole answer"))
		start := time.Now()
		res, evs, err := streamCollect(t, agent.New(agent.Config{Model: m, Tools: set(t, addTool())}), agent.Prompt("go"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Output != "whole answer" || len(res.Calls) != 1 || len(res.Messages) != 2 {
			t.Fatalf("res = %+v", res)
		}
		got := types(evs)
		if got != "run_started retrying text_delta turn_restarted text_delta usage done" {
			t.Fatalf("events = %s", got)
		}
		r := eventsOf[agent.Retrying](evs)[0]
		if r.Attempt != 1 || r.Wait != 2*time.Second || !errors.Is(r.Err, over) {
			t.Fatalf("retrying = %+v", r)
		}
		tr := eventsOf[agent.TurnRestarted](evs)[0]
		if tr.Turn != 1 || tr.Attempt != 1 || model.KindOf(tr.Err) != model.KindTruncatedStream {
			t.Fatalf("restart = %+v", tr)
		}
		if d := time.Since(start); d < 2*time.Second {
			t.Fatalf("the retry-after was not honoured: %v", d)
		}
	})
}

func TestRetriesOffFailsAtOnce(t *testing.T) {
	cut := modeltest.Turn{Events: []llm.Event{llm.TextDelta{Text: "partial"}}, CutAfter: 1}
	m := modeltest.NewScript(cut, modeltest.Text("unused"))
	_, evs, err := streamCollect(t, agent.New(agent.Config{Model: m, Retry: model.RetryPolicy{MaxRetries: -1}}), agent.Prompt("go"))
	if model.KindOf(err) != model.KindTruncatedStream || m.Calls() != 1 {
		t.Fatalf("err = %v after %d calls", err, m.Calls())
	}
	re := mustAs[*agent.RunError](t, err)
	if re.Snapshot == nil {
		t.Fatal("a run that lost its model has no snapshot")
	}
	if n := len(eventsOf[agent.Done](evs)); n != 0 {
		t.Fatal("done after a failure")
	}
	// Errors that are not retryable are not retried either.
	m = modeltest.NewScript(modeltest.Fail(model.KindAuth), modeltest.Text("unused"))
	_, err = agent.New(agent.Config{Model: m}).Run(context.Background(), agent.Prompt("go"))
	if model.KindOf(err) != model.KindAuth || m.Calls() != 1 {
		t.Fatalf("err = %v after %d calls", err, m.Calls())
	}
}

func TestTurnHookSwapsModelAndPatchesRequest(t *testing.T) {
	main := modeltest.NewScript(modeltest.ToolCalls(addCall(1)))
	other := modeltest.NewScript(modeltest.Text("from the other model"))
	hook := func(_ context.Context, ti agent.TurnInfo, req *llm.Request) (model.Model, error) {
		if ti.Turn == 2 {
			req.System = "patched"
			req.Messages = append(req.Messages[:len(req.Messages):len(req.Messages)], llm.UserText("extra context"))
			return other, nil
		}
		return nil, nil
	}
	var seen atomic.Int32
	observe := func(next model.Model) model.Model {
		return model.Funcs{GenerateFunc: func(ctx context.Context, req llm.Request) (llm.Response, error) {
			seen.Add(1)
			return next.Generate(ctx, req)
		}, StreamFunc: func(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
			seen.Add(1)
			return next.Stream(ctx, req)
		}}
	}
	a := agent.New(agent.Config{Model: main, System: "orig", Tools: set(t, addTool()), TurnHook: hook, ModelMiddleware: []model.Middleware{observe}})
	res, err := a.Run(context.Background(), agent.Prompt("go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "from the other model" || seen.Load() != 2 {
		t.Fatalf("res = %+v, middleware saw %d calls", res, seen.Load())
	}
	req := other.Requests()[0]
	if req.System != "patched" || req.Messages[len(req.Messages)-1].Text() != "extra context" {
		t.Fatalf("patched request = %+v", req)
	}
	for _, msg := range res.Messages {
		if msg.Text() == "extra context" {
			t.Fatal("the patch leaked into the run's history")
		}
	}
	// A hook can stop the run.
	stop := func(context.Context, agent.TurnInfo, *llm.Request) (model.Model, error) {
		return nil, agent.Stop("no more")
	}
	_, err = agent.New(agent.Config{Model: main, TurnHook: stop}).Run(context.Background(), agent.Prompt("go"))
	if !errors.Is(err, agent.ErrStopped) {
		t.Fatalf("err = %v", err)
	}
	// A patch that breaks tool-call pairing is caught before sending.
	bad := func(_ context.Context, ti agent.TurnInfo, req *llm.Request) (model.Model, error) {
		if ti.Turn == 2 {
			req.Messages = req.Messages[:2] // drops the results of the calls
		}
		return nil, nil
	}
	m := modeltest.NewScript(modeltest.ToolCalls(addCall(1)), modeltest.Text("x"))
	_, err = agent.New(agent.Config{Model: m, Tools: set(t, addTool()), TurnHook: bad}).Run(context.Background(), agent.Prompt("go"))
	if !errors.Is(err, llm.ErrHistory) || m.Calls() != 1 {
		t.Fatalf("err = %v, calls %d", err, m.Calls())
	}
}

func TestConversationMemory(t *testing.T) {
	st := store.NewMemory()
	m := modeltest.NewScript(modeltest.Text("Hi Ann."), modeltest.Text("Your name is Ann."), modeltest.Fail(model.KindAuth))
	a := agent.New(agent.Config{Model: m, Store: st})
	ctx := context.Background()
	if _, err := a.Run(ctx, agent.Input{Prompt: llm.UserText("I am Ann."), ConversationID: "c1"}); err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(ctx, agent.Input{Prompt: llm.UserText("Who am I?"), ConversationID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if req := m.Requests()[1]; len(req.Messages) != 3 || req.Messages[0].Text() != "I am Ann." {
		t.Fatalf("second run sent %d messages", len(req.Messages))
	}
	if len(res.Messages) != 2 {
		t.Fatalf("the run's messages include the history: %d", len(res.Messages))
	}
	// A failed run appends nothing.
	if _, err := a.Run(ctx, agent.Input{Prompt: llm.UserText("Again?"), ConversationID: "c1"}); err == nil {
		t.Fatal("want a failure")
	}
	h, err := st.History(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, msg := range h {
		texts = append(texts, msg.Text())
	}
	if strings.Join(texts, "|") != "I am Ann.|Hi Ann.|Who am I?|Your name is Ann." {
		t.Fatalf("history = %q", texts)
	}
	// Without a store a conversation id is a config error.
	_, err = agent.New(agent.Config{Model: m}).Run(ctx, agent.Input{Prompt: llm.UserText("x"), ConversationID: "c1"})
	mustAs[*agent.ConfigError](t, err)
}

func TestBreakingOutOfStreamCancelsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cancelled atomic.Bool
		p := &probe{name: "p", effect: llm.EffectReadOnly}
		p.onCall = func(ctx context.Context, _ string) (llm.ToolResult, error) {
			<-ctx.Done()
			cancelled.Store(true)
			return llm.ToolResult{}, nil
		}
		m := modeltest.NewScript(modeltest.ToolCalls(call("1", "p", "x")), modeltest.Text("never"))
		a := agent.New(agent.Config{Model: m, Tools: set(t, p)})
		for ev := range a.Stream(context.Background(), agent.Prompt("go")) {
			if _, ok := ev.(agent.ToolCall); ok {
				break
			}
		}
		synctest.Wait()
		if !cancelled.Load() && p.calls.Load() != 0 {
			t.Fatal("the tool was not cancelled")
		}
		if m.Calls() != 1 {
			t.Fatalf("model called %d times", m.Calls())
		}
	})
}

func TestResumeRefusesWhatItCannotUse(t *testing.T) {
	ctx := context.Background()
	m := modeltest.NewScript(modeltest.Turn{Err: &model.Error{Kind: model.KindServer}}, modeltest.Text("x"))
	a := agent.New(agent.Config{Model: m, Retry: model.RetryPolicy{MaxRetries: -1}})
	_, err := a.Run(ctx, agent.Prompt("go"))
	re := mustAs[*agent.RunError](t, err)
	if re.Snapshot == nil {
		t.Fatal("no snapshot")
	}
	other := agent.New(agent.Config{Model: m, System: "another prompt"})
	if _, err := other.Resume(ctx, agent.Resumption{Snapshot: re.Snapshot}); !errors.Is(err, agent.ErrResume) {
		t.Fatalf("resume with another config: %v", err)
	}
	if _, err := a.Resume(ctx, agent.Resumption{Snapshot: []byte(`{"format":9}`)}); !errors.Is(err, agent.ErrResume) || !strings.Contains(err.Error(), "format 9") {
		t.Fatalf("err = %v", err)
	}
	if _, err := a.Resume(ctx, agent.Resumption{}); !errors.Is(err, agent.ErrConfig) {
		t.Fatalf("err = %v", err)
	}
	if _, err := a.Resume(ctx, agent.Resumption{Snapshot: re.Snapshot, Decisions: []run.Decision{{CallID: "x", Action: run.Approved}}}); !errors.Is(err, agent.ErrResume) {
		t.Fatalf("decisions for a run that waits for none: %v", err)
	}
	res, err := a.Resume(ctx, agent.Resumption{Snapshot: re.Snapshot})
	if err != nil || res.Output != "x" {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
}

// A run that fails for good adds to its conversation what it got through:
// its prompt and the turns whose calls were all answered, so the next run
// knows what was asked and done.
func TestFailedRunJoinsConversation(t *testing.T) {
	ctx := context.Background()
	texts := func(st store.Store) string {
		h, err := st.History(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if err := llm.CheckHistory(h); err != nil {
			t.Fatalf("the conversation is not a valid history: %v", err)
		}
		var out []string
		for _, m := range h {
			switch {
			case len(m.ToolCalls()) > 0:
				out = append(out, "call")
			case len(m.ToolResults()) > 0:
				out = append(out, "result")
			default:
				out = append(out, m.Text())
			}
		}
		return strings.Join(out, "|")
	}
	t.Run("turn budget spent", func(t *testing.T) {
		st := store.NewMemory()
		m := modeltest.NewScript(modeltest.ToolCalls(addCall(1)), modeltest.ToolCalls(addCall(2)), modeltest.Text("next run"))
		a := agent.New(agent.Config{Model: m, Store: st, Tools: set(t, addTool()), MaxTurns: agent.Limit(2), LoopGuard: agent.LoopGuard{Repeats: -1}})
		_, err := a.Run(ctx, agent.Input{Prompt: llm.UserText("add twice"), ConversationID: "c1"})
		if !errors.Is(err, run.ErrMaxTurns) {
			t.Fatalf("err = %v", err)
		}
		if got := texts(st); got != "add twice|call|result|call|result" {
			t.Fatalf("conversation = %q", got)
		}
		if _, err := a.Run(ctx, agent.Input{Prompt: llm.UserText("go on"), ConversationID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if req := m.Requests()[2]; len(req.Messages) != 6 || req.Messages[0].Text() != "add twice" {
			t.Fatalf("the next run sent %d messages", len(req.Messages))
		}
	})
	t.Run("calls left unanswered", func(t *testing.T) {
		// A tool's machinery fails in the second turn: that turn's calls
		// have no results, so the conversation stops before it.
		st := store.NewMemory()
		p := &probe{name: "p", effect: llm.EffectReadOnly, onCall: func(_ context.Context, text string) (llm.ToolResult, error) {
			if text == "broken" {
				return llm.ToolResult{}, errors.New("the tool's machinery broke")
			}
			return tool.TextResult("fine"), nil
		}}
		m := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("", "p", `{"text":"ok"}`)), modeltest.ToolCalls(modeltest.Call("", "p", `{"text":"broken"}`)))
		a := agent.New(agent.Config{Model: m, Store: st, Tools: set(t, p)})
		_, err := a.Run(ctx, agent.Input{Prompt: llm.UserText("probe"), ConversationID: "c1"})
		if err == nil || !strings.Contains(err.Error(), "machinery broke") {
			t.Fatalf("err = %v", err)
		}
		if got := texts(st); got != "probe|call|result" {
			t.Fatalf("conversation = %q", got)
		}
	})
}

// Input.Meta is kept with the run and comes back from the store; bad meta
// is a config error before anything runs.
func TestInputMeta(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	m := modeltest.NewScript(modeltest.Text("ok"))
	a := agent.New(agent.Config{Model: m, Store: st})
	res, err := a.Run(ctx, agent.Input{Prompt: llm.UserText("hi"), Meta: json.RawMessage(`{"user":"ann"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Get(ctx, res.RunID); err != nil || info.Meta != `{"user":"ann"}` {
		t.Fatalf("meta %q, %v", info.Meta, err)
	}
	for name, tc := range map[string]struct {
		cfg  agent.Config
		meta string
	}{
		"no store":  {agent.Config{Model: m}, `{}`},
		"not JSON":  {agent.Config{Model: m, Store: st}, `{"user":`},
		"too large": {agent.Config{Model: m, Store: st}, `"` + strings.Repeat("x", store.MaxMeta) + `"`},
	} {
		_, err := agent.New(tc.cfg).Run(ctx, agent.Input{Prompt: llm.UserText("hi"), Meta: json.RawMessage(tc.meta)})
		if ce := mustAs[*agent.ConfigError](t, err); ce.Field != "Input.Meta" {
			t.Errorf("%s: %v", name, err)
		}
	}
	if m.Calls() != 1 {
		t.Errorf("%d model calls; bad meta must stop a run before it starts", m.Calls())
	}
}

func TestStartConfig(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	a := agent.New(agent.Config{Model: modeltest.NewScript(modeltest.Text("ok")), Store: st, System: "Be brief.", Tools: set(t, addTool())})
	res, err := a.Run(ctx, agent.Prompt("hi"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := agent.StartConfig(ctx, st, res.RunID)
	if err != nil || cfg.System != "Be brief." || cfg.Prompt.Text() != "hi" || len(cfg.Tools) != 1 || cfg.Tools[0].Name != "add" {
		t.Fatalf("StartConfig = %+v, %v", cfg, err)
	}
	if _, err := agent.StartConfig(ctx, st, "run_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a missing run: %v", err)
	}
}
