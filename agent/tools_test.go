package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/internal/testimage"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/tool"
)

// Eight read-only tools of 200 ms each finish in about 200 ms: they run in
// parallel by default. The time is synctest's virtual time, not the wall's.
func TestParallelReadOnlyToolsTakeTheTimeOfOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &probe{name: "slow", effect: llm.EffectReadOnly, sleep: 200 * time.Millisecond}
		var calls []llm.ToolCall
		for i := range 8 {
			calls = append(calls, call(fmt.Sprintf("c%d", i), "slow", fmt.Sprint(i)))
		}
		m := modeltest.NewScript(modeltest.ToolCalls(calls...), modeltest.Text("done"))
		a := agent.New(agent.Config{Model: m, Tools: set(t, p)})
		start := time.Now()
		res, err := a.Run(context.Background(), agent.Prompt("go"))
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 200*time.Millisecond {
			t.Fatalf("8 parallel 200ms tools took %v of virtual time, want 200ms", d)
		}
		if p.peak.Load() != 8 {
			t.Fatalf("peak concurrency %d, want 8", p.peak.Load())
		}
		for i, r := range lastResults(res.Messages) {
			if r.CallID != fmt.Sprintf("c%d", i) || r.Content != fmt.Sprintf("slow:%d", i) {
				t.Fatalf("result %d = %+v: not in call order", i, r)
			}
		}
	})
}

// Results are committed in call order even when later calls finish first.
func TestResultsCommitInCallOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &probe{name: "p", effect: llm.EffectReadOnly}
		p.onCall = func(ctx context.Context, text string) (llm.ToolResult, error) {
			d, _ := time.ParseDuration(text)
			time.Sleep(d)
			return tool.TextResult(text), nil
		}
		m := modeltest.NewScript(modeltest.ToolCalls(call("a", "p", "300ms"), call("b", "p", "100ms"), call("c", "p", "200ms")), modeltest.Text("ok"))
		res, evs, err := runCollect(t, agent.New(agent.Config{Model: m, Tools: set(t, p)}), agent.Prompt("go"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range lastResults(res.Messages) {
			got = append(got, r.CallID+"="+r.Content)
		}
		if want := []string{"a=300ms", "b=100ms", "c=200ms"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("results = %v, want %v", got, want)
		}
		var evOrder []string
		for _, e := range eventsOf[agent.ToolResult](evs) {
			evOrder = append(evOrder, e.Call.ID)
		}
		if strings.Join(evOrder, ",") != "a,b,c" {
			t.Fatalf("result events in order %v", evOrder)
		}
	})
}

// By default a call that is not read-only runs alone: after the calls
// before it and before the calls after it.
func TestDefaultConcurrencyRunsWritesAloneInCallOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var active, peakWithWrite atomic.Int32
		var order []string
		mk := func(name string, effect llm.Effect) tool.Tool {
			return tool.Func(name, "", func(ctx context.Context, in echoArgs) (string, error) {
				n := active.Add(1)
				defer active.Add(-1)
				if effect != llm.EffectReadOnly && n > 1 {
					peakWithWrite.Store(n)
				}
				order = append(order, in.Text) // racy if two writes overlapped: -race would say
				time.Sleep(10 * time.Millisecond)
				if effect != llm.EffectReadOnly && active.Load() > 1 {
					peakWithWrite.Store(active.Load())
				}
				return in.Text, nil
			}, &tool.FuncOptions[echoArgs]{Effect: effect})
		}
		m := modeltest.NewScript(modeltest.ToolCalls(
			call("1", "w", "w1"), call("2", "w", "w2"), call("3", "r", "r3"), call("4", "w", "w4"),
		), modeltest.Text("ok"))
		// Only writes here (r is read-only but alone between two writes),
		// so the append above never races.
		a := agent.New(agent.Config{Model: m, Tools: set(t, mk("w", llm.EffectDestructive), mk("r", llm.EffectReadOnly))})
		if _, err := a.Run(context.Background(), agent.Prompt("go")); err != nil {
			t.Fatal(err)
		}
		if peakWithWrite.Load() != 0 {
			t.Fatalf("a write ran alongside %d calls", peakWithWrite.Load())
		}
		if strings.Join(order, ",") != "w1,w2,r3,w4" {
			t.Fatalf("order = %v", order)
		}
	})
}

func TestExplicitConcurrencyBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &probe{name: "p", sleep: 50 * time.Millisecond} // destructive, yet bounded by N
		var calls []llm.ToolCall
		for i := range 7 {
			calls = append(calls, call(fmt.Sprint("c", i), "p", fmt.Sprint(i)))
		}
		m := modeltest.NewScript(modeltest.ToolCalls(calls...), modeltest.Text("ok"))
		start := time.Now()
		_, err := agent.New(agent.Config{Model: m, Tools: set(t, p), ToolConcurrency: 3}).Run(context.Background(), agent.Prompt("go"))
		if err != nil {
			t.Fatal(err)
		}
		if p.peak.Load() != 3 {
			t.Fatalf("peak = %d, want 3", p.peak.Load())
		}
		if d := time.Since(start); d != 150*time.Millisecond { // ceil(7/3) waves
			t.Fatalf("took %v, want 150ms", d)
		}
		if len(p.order()) != 7 {
			t.Fatalf("ran %v", p.order())
		}
	})
}

// A middleware that stops the run keeps later calls from starting and
// commits nothing.
func TestStopPreventsUnstartedCallsAndCommitsNothing(t *testing.T) {
	p := &probe{name: "p"}
	stopAt := func(text string) tool.Middleware {
		return func(next tool.Tool) tool.Tool {
			return tool.Wrap(next, func(ctx context.Context, args json.RawMessage) (llm.ToolResult, error) {
				if strings.Contains(string(args), text) {
					return llm.ToolResult{}, agent.Stop("no " + text)
				}
				return next.Call(ctx, args)
			})
		}
	}
	m := modeltest.NewScript(modeltest.ToolCalls(call("1", "p", "a"), call("2", "p", "b"), call("3", "p", "c")), modeltest.Text("unreached"))
	a := agent.New(agent.Config{Model: m, Tools: set(t, p), ToolMiddleware: []tool.Middleware{stopAt("b")}})
	_, evs, err := runCollect(t, a, agent.Prompt("go"))
	stop := mustAs[*agent.StopError](t, err)
	if stop.Reason != "no b" || !errors.Is(err, agent.ErrStopped) {
		t.Fatalf("err = %v", err)
	}
	if got := p.order(); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("ran %v, want only a", got)
	}
	if n := len(eventsOf[agent.ToolResult](evs)); n != 0 {
		t.Fatalf("%d results were reported for a batch that stopped", n)
	}
	if m.Calls() != 1 {
		t.Fatalf("the model was called again after the stop")
	}
	if re := mustAs[*agent.RunError](t, err); re.Snapshot != nil {
		t.Fatal("a stopped run offers a snapshot to resume")
	}
}

// With calls in flight, the lowest-index stopper wins and running calls
// finish.
func TestConcurrentStopsLowestIndexWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var finished atomic.Int32
		p := &probe{name: "p", effect: llm.EffectReadOnly}
		p.onCall = func(ctx context.Context, text string) (llm.ToolResult, error) {
			switch text {
			case "slow-stop": // index 1: stops last in time, first in order
				time.Sleep(30 * time.Millisecond)
				return llm.ToolResult{}, agent.Stop("index 1")
			case "fast-stop":
				time.Sleep(10 * time.Millisecond)
				return llm.ToolResult{}, agent.Stop("index 2")
			case "slow":
				time.Sleep(50 * time.Millisecond)
				finished.Add(1)
			}
			return tool.TextResult(text), nil
		}
		m := modeltest.NewScript(modeltest.ToolCalls(call("0", "p", "slow"), call("1", "p", "slow-stop"), call("2", "p", "fast-stop")))
		_, err := agent.New(agent.Config{Model: m, Tools: set(t, p)}).Run(context.Background(), agent.Prompt("go"))
		if stop := mustAs[*agent.StopError](t, err); stop.Reason != "index 1" {
			t.Fatalf("reason %q, want the lowest index's", stop.Reason)
		}
		if finished.Load() != 1 {
			t.Fatal("a running call did not finish")
		}
	})
}

func TestPreresolvedCallsNeverRun(t *testing.T) {
	p := &probe{name: "p", effect: llm.EffectReadOnly}
	m := modeltest.NewScript(modeltest.ToolCalls(
		modeltest.Call("bad", "p", `{"text":`), // malformed
		call("good", "p", "x"),
	), modeltest.Text("ok"))
	res, evs, err := runCollect(t, agent.New(agent.Config{Model: m, Tools: set(t, p)}), agent.Prompt("go"))
	if err != nil {
		t.Fatal(err)
	}
	if p.calls.Load() != 1 {
		t.Fatalf("the tool ran %d times, want 1", p.calls.Load())
	}
	rs := lastResults(res.Messages)
	if !rs[0].IsError || !strings.Contains(rs[0].Content, "could not be read") || rs[1].Content != "p:x" {
		t.Fatalf("results = %+v", rs)
	}
	tc := eventsOf[agent.ToolCall](evs)
	if !tc[0].Preresolved || tc[1].Preresolved {
		t.Fatalf("tool call events = %+v", tc)
	}
}

// Cancelling the run while tools run cancels them, closes every open call
// with an explicit result, and leaves a valid history to resume from.
func TestCancelDuringToolsClosesEveryCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var sawCancel atomic.Bool
		slow := &probe{name: "slow", effect: llm.EffectReadOnly}
		slow.onCall = func(ctx context.Context, text string) (llm.ToolResult, error) {
			if text == "fast" {
				return tool.TextResult("fast done"), nil
			}
			<-ctx.Done()
			sawCancel.Store(true)
			return tool.ErrorResult("cancelled"), nil
		}
		w := &probe{name: "w"} // destructive: waits for the read-only calls
		m := modeltest.NewScript(modeltest.ToolCalls(call("1", "slow", "fast"), call("2", "slow", "hang"), call("3", "w", "later")), modeltest.Text("resumed fine"))
		a := agent.New(agent.Config{Model: m, Tools: set(t, slow, w)})
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		_, err := a.Run(ctx, agent.Prompt("go"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		if !sawCancel.Load() || w.calls.Load() != 0 {
			t.Fatalf("tool saw cancel: %v; later call ran %d times", sawCancel.Load(), w.calls.Load())
		}
		re := mustAs[*agent.RunError](t, err)
		if re.Snapshot == nil {
			t.Fatal("no snapshot to resume from")
		}
		res, err := a.Resume(context.Background(), agent.Resumption{Snapshot: re.Snapshot})
		if err != nil {
			t.Fatal(err)
		}
		if err := llm.CheckHistory(res.Messages); err != nil {
			t.Fatal(err)
		}
		rs := lastResults(res.Messages)
		if rs[0].Content != "fast done" || rs[1].Content != agent.Interrupted || rs[2].Content != agent.NotStarted {
			t.Fatalf("results = %+v", rs)
		}
		if res.Output != "resumed fine" || res.RunID != re.RunID {
			t.Fatalf("resumed = %+v", res)
		}
	})
}

func TestToolGoErrorFailsTheRunAndPanicIsAResult(t *testing.T) {
	boom := errors.New("database is gone")
	p := &probe{name: "p"}
	p.onCall = func(ctx context.Context, text string) (llm.ToolResult, error) {
		if text == "panic" {
			panic("oops")
		}
		return llm.ToolResult{}, boom
	}
	m := modeltest.NewScript(modeltest.ToolCalls(call("1", "p", "panic")), modeltest.ToolCalls(call("2", "p", "err")))
	_, err := agent.New(agent.Config{Model: m, Tools: set(t, p)}).Run(context.Background(), agent.Prompt("go"))
	te := mustAs[*agent.ToolError](t, err)
	if te.Tool != "p" || te.CallID != "2" || !errors.Is(err, boom) || !errors.Is(err, agent.ErrTool) {
		t.Fatalf("err = %v", err)
	}
	// The panic of the first round was an error result the model saw.
	second := m.Requests()[1]
	r := lastResults(second.Messages)[0]
	if !r.IsError || !strings.Contains(r.Content, "oops") {
		t.Fatalf("panic result = %+v", r)
	}
}

func TestMiddlewareSkipsRewritesAndRedacts(t *testing.T) {
	p := &probe{name: "p"}
	mw := func(next tool.Tool) tool.Tool {
		return tool.Wrap(next, func(ctx context.Context, args json.RawMessage) (llm.ToolResult, error) {
			var in echoArgs
			json.Unmarshal(args, &in)
			switch in.Text {
			case "skip me":
				return llm.ToolResult{}, agent.Skip("not today")
			case "rewrite me":
				args = json.RawMessage(`{"text":"rewritten"}`)
			}
			res, err := next.Call(ctx, args)
			res.Content = strings.ReplaceAll(res.Content, "secret", "[redacted]")
			return res, err
		})
	}
	m := modeltest.NewScript(modeltest.ToolCalls(call("1", "p", "skip me"), call("2", "p", "rewrite me"), call("3", "p", "secret")), modeltest.Text("ok"))
	res, evs, err := runCollect(t, agent.New(agent.Config{Model: m, Tools: set(t, p), ToolMiddleware: []tool.Middleware{mw}}), agent.Prompt("go"))
	if err != nil {
		t.Fatal(err)
	}
	rs := lastResults(res.Messages)
	if rs[0].Content != agent.SkippedPrefix+"not today" || !rs[0].IsError || rs[1].Content != "p:rewritten" || rs[2].Content != "p:[redacted]" {
		t.Fatalf("results = %+v", rs)
	}
	if got := p.order(); !reflect.DeepEqual(got, []string{"rewritten", "secret"}) {
		t.Fatalf("tool saw %v", got)
	}
	if tr := eventsOf[agent.ToolResult](evs); !tr[0].Skipped || tr[1].Skipped {
		t.Fatalf("skip flags = %+v", tr)
	}
}

func TestIdempotencyKeyIsPerCall(t *testing.T) {
	p := &probe{name: "p", effect: llm.EffectReadOnly}
	m := modeltest.NewScript(modeltest.ToolCalls(call("a", "p", "1"), call("b", "p", "2")), modeltest.ToolCalls(call("a2", "p", "3")), modeltest.Text("ok"))
	a := agent.New(agent.Config{Model: m, Tools: set(t, p), NewID: func() string { return "R" }})
	if _, err := a.Run(context.Background(), agent.Prompt("go")); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, k := range p.keys {
		keys[k] = true
	}
	for _, want := range []string{"R/1/a", "R/1/b", "R/2/a2"} {
		if !keys[want] {
			t.Fatalf("keys %v lack %s", p.keys, want)
		}
	}
	if agent.IdempotencyKey(context.Background()) != "" {
		t.Fatal("a key outside a tool call")
	}
}

// Seed 003: an unknown tool is an error result and the loop goes on;
// a misspelled one is repaired; malformed arguments quote the parse error.
func TestInvalidCallsDefaultPolicy(t *testing.T) {
	p := &probe{name: "read_file", effect: llm.EffectReadOnly}
	m := modeltest.NewScript(
		modeltest.ToolCalls(call("1", "Read-File", "a")),                                  // repaired
		modeltest.ToolCalls(call("2", "rm_everything", "/"), call("3", "read_file", "b")), // retried with feedback
		modeltest.ToolCalls(modeltest.Call("4", "read_file", `{"text": "a.go",}`)),        // malformed
		modeltest.Text("done"),
	)
	res, evs, err := runCollect(t, agent.New(agent.Config{Model: m, Tools: set(t, p, addTool())}), agent.Prompt("go"))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.order(); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("ran %v, want [a]: no call of a retried turn runs", got)
	}
	rs := allResults(res.Messages)
	if rs[0].Content != "read_file:a" {
		t.Fatalf("repaired call result = %+v", rs[0])
	}
	if !strings.Contains(rs[1].Content, `no tool named "rm_everything"`) || !strings.Contains(rs[1].Content, "add, read_file") || rs[2].Content != run.NotExecuted {
		t.Fatalf("retry results = %+v", rs[1:3])
	}
	if !rs[3].IsError || !strings.Contains(rs[3].Content, "invalid character") {
		t.Fatalf("malformed result = %+v", rs[3])
	}
	inv := eventsOf[agent.InvalidToolCall](evs)
	if len(inv) != 2 || !reflect.DeepEqual(inv[0].Resolution, run.Repair{Name: "read_file"}) {
		t.Fatalf("invalid call events = %+v", inv)
	}
	if _, ok := inv[1].Resolution.(run.Retry); !ok {
		t.Fatalf("second resolution = %#v", inv[1].Resolution)
	}
}

func TestInvalidCallRetriesRunOut(t *testing.T) {
	bad := func() modeltest.Turn { return modeltest.ToolCalls(call("", "nope", "x")) }
	m := modeltest.NewScript(bad(), bad(), bad(), modeltest.Text("unreached"))
	_, err := agent.New(agent.Config{Model: m, Tools: set(t, addTool())}).Run(context.Background(), agent.Prompt("go"))
	var ue *run.UnknownToolError
	if !errors.As(err, &ue) || ue.Name != "nope" || m.Calls() != 3 {
		t.Fatalf("err = %v after %d calls; want an unknown-tool failure after 2 retries", err, m.Calls())
	}
	// A custom policy decides instead.
	m = modeltest.NewScript(bad(), modeltest.Text("answered"))
	skip := agent.InvalidToolPolicyFunc(func(_ context.Context, c agent.InvalidCall) run.Resolution {
		return run.Skip{Reason: "skipped " + c.Call.Name}
	})
	res, err := agent.New(agent.Config{Model: m, Tools: set(t, addTool()), InvalidToolPolicy: skip}).Run(context.Background(), agent.Prompt("go"))
	if err != nil || allResults(res.Messages)[0].Content != "skipped nope" {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
}

func TestConsecutiveFailedRoundsStop(t *testing.T) {
	p := &probe{name: "p"}
	p.onCall = func(ctx context.Context, text string) (llm.ToolResult, error) {
		if text == "ok" {
			return tool.TextResult("fine"), nil
		}
		return tool.ErrorResult("failed: " + text), nil
	}
	var turns []modeltest.Turn
	for _, s := range []string{"x", "y", "ok", "x1", "x2", "x3", "x4"} {
		turns = append(turns, modeltest.ToolCalls(call("", "p", s)))
	}
	m := modeltest.NewScript(turns...)
	_, err := agent.New(agent.Config{Model: m, Tools: set(t, p)}).Run(context.Background(), agent.Prompt("go"))
	tf := mustAs[*agent.ToolFailuresError](t, err)
	if tf.Rounds != 3 || m.Calls() != 6 || !strings.Contains(err.Error(), "failed: x3") {
		t.Fatalf("err = %v after %d calls", err, m.Calls())
	}
	// Limit(0) turns the guard off.
	m = modeltest.NewScript(append(turns[3:], modeltest.Text("gave up"))...)
	res, err := agent.New(agent.Config{Model: m, Tools: set(t, p), MaxFailedRounds: agent.Limit(0)}).Run(context.Background(), agent.Prompt("go"))
	if err != nil || res.Output != "gave up" {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
}

// A tool's image that the providers would refuse (here a side over 8000
// pixels) never reaches the model or the history: it is left out and the
// result says why, so the run's later requests do not all fail. The
// image the providers take arrives, relabelled with its bytes' type.
func TestRefusedToolImagesAreLeftOut(t *testing.T) {
	good := testimage.Make("png", 4, 4)
	tall := testimage.Make("png", 1, tool.MaxImageSide+1)
	shot := tool.Func("shot", "Takes a screenshot.", func(context.Context, struct{}) (llm.ToolResult, error) {
		return llm.ToolResult{Content: "two shots", Images: []llm.Image{
			{Data: tall, MediaType: "image/png"},
			{Data: good, MediaType: "image/x-png"},
		}}, nil
	}, &tool.FuncOptions[struct{}]{Effect: llm.EffectReadOnly})
	m := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("c1", "shot", `{}`)), modeltest.Text("seen"))
	a := agent.New(agent.Config{Model: m, Tools: set(t, shot)})
	res, err := a.Run(context.Background(), agent.Prompt("look"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := m.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls", len(reqs))
	}
	sent := lastResults(reqs[1].Messages)
	kept := lastResults(res.Messages)
	for name, rs := range map[string][]llm.ToolResult{"sent": sent, "kept": kept} {
		if len(rs) != 1 {
			t.Fatalf("%s: %d results", name, len(rs))
		}
		r := rs[0]
		if !reflect.DeepEqual(r.Images, []llm.Image{{Data: good, MediaType: "image/png"}}) {
			t.Errorf("%s: images %+v, want only the 4×4 PNG", name, r.Images)
		}
		want := fmt.Sprintf("two shots\n[image 1: image/png, %d bytes; left out: 1×8001 pixels; a side may have at most 8000]", len(tall))
		if r.Content != want || r.IsError {
			t.Errorf("%s: content %q (error %v), want %q", name, r.Content, r.IsError, want)
		}
	}
}
