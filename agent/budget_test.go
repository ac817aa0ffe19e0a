package agent_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
)

func addCall(a int) llm.ToolCall {
	return modeltest.Call("", "add", `{"a":`+string(rune('0'+a))+`,"b":1}`)
}

func usage(in, out int64) llm.Usage { return llm.Usage{InputTokens: in, OutputTokens: out} }

func TestTokenBudgetWarnsThenWrapsUp(t *testing.T) {
	m := modeltest.NewScript(
		modeltest.ToolCalls(addCall(1)).WithUsage(usage(50, 10)), // 60
		modeltest.ToolCalls(addCall(2)).WithUsage(usage(20, 5)),  // 85: soft (80)
		modeltest.ToolCalls(addCall(3)).WithUsage(usage(20, 5)),  // 110: hard
		modeltest.Text("final answer").WithUsage(usage(5, 5)),
	)
	res, evs, err := runCollect(t, agent.New(agent.Config{Model: m, Tools: set(t, addTool()), Budget: agent.Budget{MaxTokens: 100}}), agent.Prompt("go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "final answer" || m.Calls() != 4 {
		t.Fatalf("res = %+v after %d calls", res, m.Calls())
	}
	notes := eventsOf[agent.Note](evs)
	if len(notes) != 2 || notes[0].Reason != "budget" || notes[0].WrapUp || !strings.Contains(notes[0].Text, "85% of its token budget") || !notes[1].WrapUp {
		t.Fatalf("notes = %+v", notes)
	}
	reqs := m.Requests()
	// The soft note follows the results of turn 2; the last call is tool-free.
	if last := reqs[2].Messages[len(reqs[2].Messages)-1]; !strings.Contains(last.Text(), "Wrap up") || len(last.ToolResults()) != 1 {
		t.Fatalf("turn 3 saw %+v", last)
	}
	if reqs[3].ToolChoice.Mode != llm.ToolNone || !strings.Contains(reqs[3].Messages[len(reqs[3].Messages)-1].Text(), "token budget is spent") {
		t.Fatalf("final request = %+v", reqs[3])
	}
}

func TestBudgetFailIsTyped(t *testing.T) {
	m := modeltest.NewScript(modeltest.ToolCalls(addCall(1)).WithUsage(usage(90, 20)), modeltest.Text("x"))
	_, err := agent.New(agent.Config{Model: m, Tools: set(t, addTool()), Budget: agent.Budget{MaxTokens: 100, Fail: true}}).Run(context.Background(), agent.Prompt("go"))
	be := mustAs[*agent.BudgetError](t, err)
	if be.Limit != "tokens" || be.Used != 110 || be.Max != 100 || !errors.Is(err, agent.ErrBudget) || m.Calls() != 1 {
		t.Fatalf("err = %v (calls %d)", err, m.Calls())
	}
}

func TestCostBudget(t *testing.T) {
	resp := func(model string, u llm.Usage, parts ...llm.Part) modeltest.Turn {
		r := modeltest.Response(llm.FinishToolCalls, parts...)
		r.Model, r.Usage = model, u
		return modeltest.Turn{Response: r}
	}
	// gpt-4o-mini-2024-07-18 prices as gpt-4o-mini by prefix: 1M in + 1M out = $0.75.
	m := modeltest.NewScript(
		resp("gpt-4o-mini-2024-07-18", usage(1_000_000, 1_000_000), addCall(1)),
		resp("gpt-4o-mini-2024-07-18", usage(1_000_000, 0), llm.Text{Text: "done"}),
	)
	res, evs, err := runCollect(t, agent.New(agent.Config{Model: m, Tools: set(t, addTool()), Budget: agent.Budget{MaxCostUSD: 10}}), agent.Prompt("go"))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.CostUSD-0.90) > 1e-9 {
		t.Fatalf("cost = %v, want 0.90", res.CostUSD)
	}
	if u := eventsOf[agent.Usage](evs); math.Abs(u[0].CostUSD-0.75) > 1e-9 {
		t.Fatalf("usage events = %+v", u)
	}
	// Over the limit: wrap up; a price of one's own overrides the table.
	m = modeltest.NewScript(resp("mine", usage(1000, 0), addCall(1)), resp("mine", usage(1, 1), llm.Text{Text: "ok"}))
	res, err = agent.New(agent.Config{Model: m, Tools: set(t, addTool()), Budget: agent.Budget{MaxCostUSD: 1, Prices: map[string]agent.Price{"mine": {Input: 1000}}}}).Run(context.Background(), agent.Prompt("go"))
	if err != nil || m.Requests()[1].ToolChoice.Mode != llm.ToolNone {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	// A cost budget for a model without a price cannot be enforced.
	m = modeltest.NewScript(resp("who-knows", usage(1, 1), llm.Text{Text: "x"}))
	_, err = agent.New(agent.Config{Model: m, Budget: agent.Budget{MaxCostUSD: 1}}).Run(context.Background(), agent.Prompt("go"))
	if be := mustAs[*agent.BudgetError](t, err); !strings.Contains(be.Error(), `"who-knows"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestPrices(t *testing.T) {
	p, ok := agent.Budget{}.PriceOf("claude-sonnet-4-5-20250929")
	if !ok || p.Input != 3 {
		t.Fatalf("price = %+v, %v", p, ok)
	}
	// Cache reads at their own price.
	got := p.Cost(llm.Usage{InputTokens: 1_000_000, CacheReadTokens: 500_000, OutputTokens: 0})
	if want := 0.5*3 + 0.5*0.30; math.Abs(got-want) > 1e-9 {
		t.Fatalf("cost = %v, want %v", got, want)
	}
	if _, ok := (agent.Budget{}).PriceOf("unknown-model"); ok {
		t.Fatal("an unknown model has a price")
	}
}

// Newer models whose names start with an older one's have prices of
// their own, and cache writes are priced at their rate.
func TestPricesOfNewerModels(t *testing.T) {
	for name, want := range map[string]float64{
		"claude-opus-4-5-20251101": 5,
		"claude-opus-4-6":          5,
		"claude-opus-4-1-20250805": 15,
		"claude-sonnet-4-6":        3,
		"o3-mini-2025-01-31":       1.10,
		"o3-pro":                   20,
		"gpt-5-mini-2025-08-07":    0.25,
	} {
		if p, ok := (agent.Budget{}).PriceOf(name); !ok || p.Input != want {
			t.Errorf("%s: price %+v (%v), want input $%v", name, p, ok, want)
		}
	}
	p, _ := agent.Budget{}.PriceOf("claude-sonnet-4-5")
	// 5,000 uncached, 3,000 read from and 2,000 written to the cache, 100 out.
	got := p.Cost(llm.Usage{InputTokens: 10_000, CacheReadTokens: 3_000, CacheWriteTokens: 2_000, OutputTokens: 100})
	if want := (5000*3 + 3000*0.30 + 2000*3.75 + 100*15) / 1e6; math.Abs(got-want) > 1e-12 {
		t.Fatalf("cost = %v, want %v", got, want)
	}
}

func TestTimeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &probe{name: "p", sleep: 40 * time.Second}
		m := modeltest.NewScript(
			modeltest.ToolCalls(call("", "p", "1")), // 40 s: under 80%
			modeltest.ToolCalls(call("", "p", "2")), // 80 s: soft
			modeltest.ToolCalls(call("", "p", "3")), // 120 s: over
			modeltest.Text("in time"),
		)
		res, evs, err := runCollect(t, agent.New(agent.Config{Model: m, Tools: set(t, p), Budget: agent.Budget{MaxDuration: 100 * time.Second}}), agent.Prompt("go"))
		if err != nil || res.Output != "in time" {
			t.Fatalf("res = %+v, err = %v", res, err)
		}
		notes := eventsOf[agent.Note](evs)
		if len(notes) != 2 || !strings.Contains(notes[0].Text, "time budget") || !notes[1].WrapUp {
			t.Fatalf("notes = %+v", notes)
		}
	})
}

func TestToolCallBudget(t *testing.T) {
	p := &probe{name: "p", effect: llm.EffectReadOnly}
	m := modeltest.NewScript(
		modeltest.ToolCalls(call("1", "p", "a"), call("2", "p", "b"), call("3", "p", "c")),
		modeltest.Text("done"),
	)
	res, err := agent.New(agent.Config{Model: m, Tools: set(t, p), Budget: agent.Budget{MaxToolCalls: 2}}).Run(context.Background(), agent.Prompt("go"))
	if err != nil {
		t.Fatal(err)
	}
	if p.calls.Load() != 2 || lastResults(res.Messages)[2].Content != agent.ToolBudgetSpent {
		t.Fatalf("calls %d, results %+v", p.calls.Load(), lastResults(res.Messages))
	}
	if m.Requests()[1].ToolChoice.Mode != llm.ToolNone {
		t.Fatal("the call after the budget was spent offered tools")
	}
}

func TestLoopGuard(t *testing.T) {
	p := &probe{name: "p", effect: llm.EffectReadOnly}
	var turns []modeltest.Turn
	for range 6 {
		turns = append(turns, modeltest.ToolCalls(modeltest.Call("", "p", `{"text":"same"}`)))
	}
	turns[1] = modeltest.ToolCalls(modeltest.Call("", "p", `{ "text" : "same" }`)) // same arguments, other spelling
	m := modeltest.NewScript(append(turns, modeltest.Text("stuck, here is what I have"))...)
	res, evs, err := runCollect(t, agent.New(agent.Config{Model: m, Tools: set(t, p)}), agent.Prompt("go"))
	if err != nil {
		t.Fatal(err)
	}
	notes := eventsOf[agent.Note](evs)
	if len(notes) != 2 || notes[0].Reason != "loop" || !strings.Contains(notes[0].Text, "3 times") || notes[1].Reason != "loop" || !notes[1].WrapUp {
		t.Fatalf("notes = %+v", notes)
	}
	if p.calls.Load() != 6 || m.Calls() != 7 || res.Output != "stuck, here is what I have" {
		t.Fatalf("tool ran %d times, model called %d times", p.calls.Load(), m.Calls())
	}
	// The nudge rides with the results of the 3rd call.
	if msgs := m.Requests()[3].Messages; !strings.Contains(msgs[len(msgs)-1].Text(), "same arguments 3 times") {
		t.Fatalf("turn 4 request ends with %+v", msgs[len(msgs)-1])
	}
}
