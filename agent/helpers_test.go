package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/tool"
)

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// addTool is a read-only tool that adds two numbers.
func addTool() tool.Tool {
	return tool.Func("add", "Adds a and b.", func(_ context.Context, in addArgs) (int, error) {
		return in.A + in.B, nil
	}, &tool.FuncOptions[addArgs]{Effect: llm.EffectReadOnly})
}

type echoArgs struct {
	Text string `json:"text"`
}

// probe is a tool that records its calls: how many ran at once, their
// order, and can sleep, fail or block as told by its arguments' text.
type probe struct {
	name    string
	effect  llm.Effect
	sleep   time.Duration
	mu      sync.Mutex
	started []string // texts in start order
	keys    []string // idempotency keys seen
	active  atomic.Int32
	peak    atomic.Int32
	calls   atomic.Int32
	onCall  func(ctx context.Context, text string) (llm.ToolResult, error)
}

func (p *probe) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: p.name, Description: "probe", Effect: p.effect,
		Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}
}

func (p *probe) Call(ctx context.Context, args json.RawMessage) (llm.ToolResult, error) {
	var in echoArgs
	json.Unmarshal(args, &in)
	p.calls.Add(1)
	n := p.active.Add(1)
	defer p.active.Add(-1)
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			break
		}
	}
	p.mu.Lock()
	p.started = append(p.started, in.Text)
	p.keys = append(p.keys, agent.IdempotencyKey(ctx))
	p.mu.Unlock()
	if p.sleep > 0 {
		select {
		case <-time.After(p.sleep):
		case <-ctx.Done():
			return tool.ErrorResult("cancelled"), nil
		}
	}
	if p.onCall != nil {
		return p.onCall(ctx, in.Text)
	}
	return tool.TextResult(p.name + ":" + in.Text), nil
}

func (p *probe) order() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.started...)
}

func call(id, name, text string) llm.ToolCall {
	return modeltest.Call(id, name, fmt.Sprintf(`{"text":%q}`, text))
}

func set(t testing.TB, tools ...tool.Tool) *tool.Set {
	t.Helper()
	s, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runCollect runs a with in, collecting its events.
func runCollect(t testing.TB, a *agent.Agent, in agent.Input) (agent.Result, []agent.Event, error) {
	t.Helper()
	var evs []agent.Event
	in.OnEvent = func(e agent.Event) { evs = append(evs, e) }
	res, err := a.Run(context.Background(), in)
	return res, evs, err
}

// streamCollect streams a with in, collecting its events; the Result is
// the Done event's.
func streamCollect(t testing.TB, a *agent.Agent, in agent.Input) (agent.Result, []agent.Event, error) {
	t.Helper()
	var evs []agent.Event
	var res agent.Result
	for ev, err := range a.Stream(context.Background(), in) {
		if err != nil {
			if ev != nil {
				t.Fatalf("the error element carries an event %T", ev)
			}
			return res, evs, err
		}
		evs = append(evs, ev)
		if d, ok := ev.(agent.Done); ok {
			res = d.Result
		}
	}
	return res, evs, nil
}

// describe renders events as JSON lines, leaving out deltas.
func describe(t testing.TB, evs []agent.Event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		switch e.(type) {
		case agent.TextDelta, agent.ThinkingDelta:
			continue
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("encoding %T: %v", e, err)
		}
		out = append(out, string(b))
	}
	return out
}

func types(evs []agent.Event) string {
	var names []string
	for _, e := range evs {
		names = append(names, agent.EventType(e))
	}
	return strings.Join(names, " ")
}

func text(evs []agent.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if d, ok := e.(agent.TextDelta); ok {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

func eventsOf[T agent.Event](evs []agent.Event) []T {
	var out []T
	for _, e := range evs {
		if v, ok := e.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func mustAs[T error](t testing.TB, err error) T {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Fatalf("error %v (%T) is not a %T", err, err, target)
	}
	return target
}

// lastResults returns the tool results of the last user message holding
// any.
func lastResults(msgs []llm.Message) []llm.ToolResult {
	for i := len(msgs) - 1; i >= 0; i-- {
		if rs := msgs[i].ToolResults(); len(rs) > 0 {
			return rs
		}
	}
	return nil
}

func allResults(msgs []llm.Message) []llm.ToolResult {
	var out []llm.ToolResult
	for _, m := range msgs {
		out = append(out, m.ToolResults()...)
	}
	return out
}
