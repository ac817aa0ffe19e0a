package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
)

func TestRunAnswersText(t *testing.T) {
	m := modeltest.NewScript(modeltest.Text("hello").WithUsage(llm.Usage{InputTokens: 5, OutputTokens: 2}))
	a := agent.New(agent.Config{Model: m, System: "be brief"})
	res, evs, err := runCollect(t, a, agent.Prompt("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "hello" || len(res.Messages) != 2 || res.Usage.Total() != 7 || len(res.Calls) != 1 || res.RunID == "" {
		t.Fatalf("result = %+v", res)
	}
	if got := types(evs); got != "run_started text_delta usage done" {
		t.Fatalf("events = %s", got)
	}
	req := m.Requests()[0]
	if req.System != "be brief" || len(req.Messages) != 1 || req.Messages[0].Text() != "hi" {
		t.Fatalf("request = %+v", req)
	}
}

func TestNilModelIsAConfigError(t *testing.T) {
	_, err := agent.New(agent.Config{}).Run(context.Background(), agent.Prompt("hi"))
	ce := mustAs[*agent.ConfigError](t, err)
	if ce.Field != "Model" || !errors.Is(err, agent.ErrConfig) {
		t.Fatalf("err = %v", err)
	}
	for _, err := range collectErrs(agent.New(agent.Config{}).Stream(context.Background(), agent.Prompt("hi"))) {
		if !errors.Is(err, agent.ErrConfig) {
			t.Fatalf("stream err = %v", err)
		}
	}
}

func collectErrs(seq func(func(agent.Event, error) bool)) []error {
	var errs []error
	for _, err := range seq {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func TestBadConfigIsReported(t *testing.T) {
	m := modeltest.NewScript()
	for name, cfg := range map[string]agent.Config{
		"MaxTurns":         {Model: m, MaxTurns: agent.Limit(-1)},
		"ToolConcurrency":  {Model: m, ToolConcurrency: -2},
		"Budget.Soft":      {Model: m, Budget: agent.Budget{Soft: 1.5}},
		"Budget.MaxTokens": {Model: m, Budget: agent.Budget{MaxTokens: -1}},
	} {
		_, err := agent.New(cfg).Run(context.Background(), agent.Prompt("hi"))
		if ce := mustAs[*agent.ConfigError](t, err); ce.Field != name {
			t.Errorf("%s: field %q", name, ce.Field)
		}
	}
	if m.Calls() != 0 {
		t.Fatalf("the model was called %d times", m.Calls())
	}
	// An input the machine cannot start from is refused before any call.
	_, err := agent.New(agent.Config{Model: m}).Run(context.Background(), agent.Input{})
	mustAs[*agent.ConfigError](t, err)
}

func toolScript() []modeltest.Turn {
	return []modeltest.Turn{
		modeltest.ToolCalls(modeltest.Call("c1", "add", `{"a":1,"b":2}`), modeltest.Call("c2", "add", `{"a":3,"b":4}`)).WithUsage(llm.Usage{InputTokens: 10, OutputTokens: 5}),
		{Events: []llm.Event{ // Generate folds them; Stream yields them one by one
			llm.ThinkingDelta{Start: true, Text: "sum them"}, llm.TextDelta{Text: "3 and "}, llm.TextDelta{Text: "7"},
			llm.Finish{Reason: llm.FinishStop},
		}},
	}
}

func TestRunAndStreamAgree(t *testing.T) {
	cfg := agent.Config{Tools: set(t, addTool()), NewID: func() string { return "run_fixed" }}
	cfg.Model = modeltest.NewScript(toolScript()...)
	r1, e1, err := runCollect(t, agent.New(cfg), agent.Prompt("add"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model = modeltest.NewScript(toolScript()...)
	r2, e2, err := streamCollect(t, agent.New(cfg), agent.Prompt("add"))
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := json.Marshal(r1)
	b2, _ := json.Marshal(r2)
	if string(b1) != string(b2) {
		t.Fatalf("results differ:\nrun:    %s\nstream: %s", b1, b2)
	}
	d1, d2 := describe(t, e1), describe(t, e2)
	if !reflect.DeepEqual(d1, d2) {
		t.Fatalf("events differ:\nrun:    %s\nstream: %s", strings.Join(d1, "\n"), strings.Join(d2, "\n"))
	}
	if text(e1) != "3 and 7" || text(e2) != "3 and 7" {
		t.Fatalf("text deltas: run %q, stream %q", text(e1), text(e2))
	}
	if r1.Output != "3 and 7" || len(r1.Messages) != 4 {
		t.Fatalf("result = %+v", r1)
	}
	want := "run_started usage tool_call tool_call tool_result tool_result usage done"
	if got := strings.Join(nonDeltaTypes(e1), " "); got != want {
		t.Fatalf("events = %s, want %s", got, want)
	}
	rs := lastResults(r1.Messages)
	if rs[0].Content != "3" || rs[1].Content != "7" {
		t.Fatalf("results = %+v", rs)
	}
}

func nonDeltaTypes(evs []agent.Event) []string {
	var out []string
	for _, e := range evs {
		switch e.(type) {
		case agent.TextDelta, agent.ThinkingDelta:
			continue
		}
		out = append(out, agent.EventType(e))
	}
	return out
}

func TestStreamDeliversDeltasAsTheyArrive(t *testing.T) {
	evs := []llm.Event{
		llm.TextDelta{Text: "Hel"}, llm.ThinkingDelta{Start: true, Text: "hmm"}, llm.TextDelta{Text: "lo"},
		llm.Finish{Reason: llm.FinishStop},
	}
	a := agent.New(agent.Config{Model: modeltest.NewScript(modeltest.Turn{Events: evs})})
	res, got, err := streamCollect(t, a, agent.Prompt("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if tt := types(got); tt != "run_started text_delta thinking_delta text_delta usage done" {
		t.Fatalf("events = %s", tt)
	}
	if res.Output != "Hello" {
		t.Fatalf("output = %q", res.Output)
	}
}

func TestMaxTurns(t *testing.T) {
	loop := func(n int) []modeltest.Turn {
		var ts []modeltest.Turn
		for range n {
			ts = append(ts, modeltest.ToolCalls(modeltest.Call("", "add", `{"a":1,"b":1}`)))
		}
		return ts
	}
	t.Run("zero allows no call", func(t *testing.T) {
		m := modeltest.NewScript(modeltest.Text("x"))
		_, err := agent.New(agent.Config{Model: m, MaxTurns: agent.Limit(0)}).Run(context.Background(), agent.Prompt("hi"))
		if !errors.Is(err, run.ErrMaxTurns) || m.Calls() != 0 {
			t.Fatalf("err = %v, calls = %d", err, m.Calls())
		}
		mustAs[*agent.RunError](t, err)
	})
	t.Run("exactly n calls", func(t *testing.T) {
		m := modeltest.NewScript(loop(5)...)
		_, err := agent.New(agent.Config{Model: m, Tools: set(t, addTool()), MaxTurns: agent.Limit(3), LoopGuard: agent.LoopGuard{Repeats: -1}}).Run(context.Background(), agent.Prompt("hi"))
		var mt *run.MaxTurnsError
		if !errors.As(err, &mt) || mt.MaxTurns != 3 || m.Calls() != 3 {
			t.Fatalf("err = %v, calls = %d", err, m.Calls())
		}
	})
	t.Run("default is 20", func(t *testing.T) {
		m := modeltest.NewScript(loop(25)...)
		_, err := agent.New(agent.Config{Model: m, Tools: set(t, addTool()), LoopGuard: agent.LoopGuard{Repeats: -1}}).Run(context.Background(), agent.Prompt("hi"))
		if !errors.Is(err, run.ErrMaxTurns) || m.Calls() != agent.DefaultMaxTurns {
			t.Fatalf("err = %v, calls = %d", err, m.Calls())
		}
	})
	t.Run("graceful last turn", func(t *testing.T) {
		m := modeltest.NewScript(append(loop(2), modeltest.Text("final"))...)
		res, err := agent.New(agent.Config{Model: m, Tools: set(t, addTool()), MaxTurns: agent.Limit(3), GracefulLastTurn: true}).Run(context.Background(), agent.Prompt("hi"))
		if err != nil || res.Output != "final" {
			t.Fatalf("res = %+v, err = %v", res, err)
		}
		if last := m.Requests()[2]; last.ToolChoice.Mode != llm.ToolNone {
			t.Fatalf("last call's tool choice = %+v", last.ToolChoice)
		}
	})
}

func TestConcurrentRunsShareNothing(t *testing.T) {
	m := model.Funcs{GenerateFunc: func(ctx context.Context, req llm.Request) (llm.Response, error) {
		if len(req.Messages) == 1 {
			return modeltest.Response(llm.FinishToolCalls, modeltest.Call("c1", "add", `{"a":2,"b":2}`)), nil
		}
		return modeltest.Response(llm.FinishStop, llm.Text{Text: req.Messages[0].Text() + "=" + req.Messages[2].ToolResults()[0].Content}), nil
	}}
	a := agent.New(agent.Config{Model: m, Tools: set(t, addTool())})
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			p := strings.Repeat("x", i)
			res, err := a.Run(context.Background(), agent.Prompt(p))
			if err != nil {
				errs <- err
				return
			}
			if res.Output != p+"=4" {
				errs <- errors.New("run " + p + " got " + res.Output)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestEventsEncodeAsJSONLines(t *testing.T) {
	evs := []agent.Event{
		agent.RunStarted{RunID: "r"},
		agent.Retrying{Turn: 1, Attempt: 2, Wait: 1500e6, Err: errors.New("overloaded")},
		agent.InvalidToolCall{Turn: 1, Call: llm.ToolCall{ID: "c", Name: "x"}, Resolution: run.Repair{Name: "y"}},
		agent.Done{Result: agent.Result{RunID: "r", Output: "ok"}},
	}
	want := []string{
		`{"type":"run_started","run_id":"r"}`,
		`{"type":"retrying","turn":1,"attempt":2,"wait_ms":1500,"error":"overloaded"}`,
		`{"type":"invalid_tool_call","turn":1,"call":{"id":"c","name":"x"},"resolution":{"type":"repair","name":"y"}}`,
		`{"type":"done","result":{"run_id":"r","output":"ok","message":{"role":"","parts":[]},"messages":null,"calls":null}}`,
	}
	for i, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want[i] {
			t.Errorf("%T:\n got %s\nwant %s", e, b, want[i])
		}
	}
}
