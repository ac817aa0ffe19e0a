package temporal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"go.temporal.io/sdk/converter"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/tool"
)

// bulkTool answers every call with about size bytes that differ per call.
func bulkTool(size int) tool.Tool {
	return tool.Func("bulk", "Returns a lot of text.", func(_ context.Context, in textIn) (string, error) {
		line := fmt.Sprintf("call %s: the quick brown fox jumps over the lazy dog.\n", in.Text)
		return strings.Repeat(line, size/len(line)+1)[:size], nil
	}, &tool.FuncOptions[textIn]{Effect: llm.EffectReadOnly})
}

// bulkModel plays n turns that call bulk and a last one that answers
// text, choosing the turn by the length of the transcript it is sent: it
// keeps no state, so any worker, in any process, answers alike. It checks
// that the transcript ends with the result of the call before, and counts
// its calls.
func bulkModel(n int, calls *atomic.Int64) model.Model {
	return model.Funcs{GenerateFunc: func(_ context.Context, req llm.Request) (llm.Response, error) {
		calls.Add(1)
		i := (len(req.Messages) - 1) / 2
		if len(req.Messages)%2 != 1 || i > n {
			return llm.Response{}, &model.Error{Kind: model.KindBadRequest, Message: fmt.Sprintf("a transcript of %d messages", len(req.Messages))}
		}
		if i > 0 {
			r := req.Messages[len(req.Messages)-1].ToolResults()
			if len(r) != 1 || !strings.HasPrefix(r[0].Content, fmt.Sprintf("call %d:", i-1)) {
				return llm.Response{}, &model.Error{Kind: model.KindBadRequest, Message: fmt.Sprintf("turn %d: the transcript does not end with the result of call %d", i, i-1)}
			}
		}
		if i == n {
			return modeltest.Response(llm.FinishStop, llm.Text{Text: "that was a lot"}), nil
		}
		resp := modeltest.Response(llm.FinishToolCalls, modeltest.Call(fmt.Sprintf("c%d", i), "bulk", fmt.Sprintf(`{"text":"%d"}`, i)))
		resp.Usage = llm.Usage{InputTokens: int64(i), OutputTokens: 1}
		return resp, nil
	}}
}

// countingBlobs counts what reaches the store.
type countingBlobs struct {
	MemoryBlobs
	gets atomic.Int64
}

func (c *countingBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	c.gets.Add(1)
	return c.MemoryBlobs.Get(ctx, key)
}

// runBulk runs turns tool turns of 5 KB results in test environments whose
// payloads are measured, and returns the response, the recorders of each
// workflow run and the loads made.
func runBulk(t *testing.T, turns int, opts Options, store Blobs) (run.Response, []*sizeRecorder, int) {
	t.Helper()
	tools := mustSet(t, bulkTool(5000))
	var calls atomic.Int64
	reg := Registry{Models: map[string]model.Model{"m": bulkModel(turns, &calls)}, Tools: tools, Blobs: store}
	acts, err := newActivities(reg)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*sizeRecorder
	loads := 0
	mk := func() *testsuiteEnv {
		rec := newSizeRecorder()
		recs = append(recs, rec)
		env := newBareEnv(t)
		RegisterWorkflow(env)
		acts.register(env)
		env.SetDataConverter(rec)
		env.SetOnActivityCompletedListener(func(info *activityInfo, _ converter.EncodedValue, _ error) {
			if info.ActivityType.Name == ActivityLoad {
				loads++
			}
			// Let the workflow see its history grow, as a server would
			// tell it: the payloads are most of it.
			_, total, _ := rec.stats()
			env.SetCurrentHistorySize(int(total))
		})
		return env
	}
	in := Input{Model: "m", Tools: []string{"bulk"}, Run: run.Config{Prompt: llm.UserText("read it all"), MaxTurns: run.Turns(turns + 1)}, Options: opts}
	resp, err, _ := execute(t, mk, in)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != int64(turns+1) {
		t.Fatalf("%d model calls for %d turns", calls.Load(), turns+1)
	}
	return resp, recs, loads
}

// ADVERSARIAL 73: 200 turns with 5 KB tool results: no payload over 2 MB,
// every workflow run's history under 10 MB, continue-as-new exercised
// (inline and by reference), and the model activity's input stays small.
func TestBoundedHistory200Turns(t *testing.T) {
	if testing.Short() {
		t.Skip("200 turns")
	}
	const turns = 200
	store := &countingBlobs{}
	resp, recs, loads := runBulk(t, turns, Options{HistoryBytes: 512 << 10, InlineCarryBytes: 256 << 10}, store)
	if resp.Output != "that was a lot" || len(resp.Calls) != turns+1 || len(resp.Messages) != 2*turns+2 {
		t.Fatalf("output %q, %d calls, %d messages", resp.Output, len(resp.Calls), len(resp.Messages))
	}
	for i := range turns {
		r := resp.Messages[2+2*i].ToolResults()
		if len(r) != 1 || len(r[0].Content) != 5000 || !strings.HasPrefix(r[0].Content, fmt.Sprintf("call %d:", i)) {
			t.Fatalf("turn %d lost its result: %+v", i, r)
		}
	}
	if want := int64(turns * (turns - 1) / 2); resp.Usage.InputTokens != want {
		t.Fatalf("usage %d input tokens, want %d summed over every run", resp.Usage.InputTokens, want)
	}
	if len(recs) < 3 {
		t.Fatalf("%d workflow runs: continue-as-new was not exercised", len(recs))
	}
	if loads == 0 {
		t.Fatal("no run was carried by reference")
	}
	var all int64
	for i, rec := range recs {
		biggest, total, n := rec.stats()
		all += total
		t.Logf("run %d: %d payloads, %d bytes, largest %d", i+1, n, total, biggest)
		if biggest > 2<<20 {
			t.Errorf("run %d has a payload of %d bytes, over 2 MiB", i+1, biggest)
		}
		if total > 10<<20 {
			t.Errorf("run %d's payloads total %d bytes, over 10 MiB", i+1, total)
		}
	}
	t.Logf("%d runs, %d payload bytes in all, %d loads, %d blob reads", len(recs), all, loads, store.gets.Load())
	if all > 10<<20 {
		t.Errorf("all runs together hold %d payload bytes, over 10 MiB", all)
	}
}

// Without continue-as-new, a model call's input holds only what is new:
// the history grows linearly, not with the square of the turns.
func TestModelInputIsADelta(t *testing.T) {
	_, recs20, _ := runBulk(t, 20, Options{HistoryBytes: -1, HistoryEvents: -1}, nil)
	_, recs80, _ := runBulk(t, 80, Options{HistoryBytes: -1, HistoryEvents: -1}, nil)
	if len(recs20) != 1 || len(recs80) != 1 {
		t.Fatal("continued as new")
	}
	// Subtract the final result (which holds the whole transcript once).
	_, t20, _ := recs20[0].stats()
	_, t80, _ := recs80[0].stats()
	per20, per80 := float64(t20)/20, float64(t80)/80
	t.Logf("bytes per turn: %.0f at 20 turns, %.0f at 80", per20, per80)
	if per80 > 1.25*per20 {
		t.Fatalf("bytes per turn grow with the run (%.0f at 20 turns, %.0f at 80): the model input is not a delta", per20, per80)
	}
}

// The same run continued as new, inline and by reference, ends as the
// straight run does.
func TestContinueAsNew(t *testing.T) {
	tools := mustSet(t, echoTool("echo", llm.EffectReadOnly))
	turns := func() []modeltest.Turn {
		var ts []modeltest.Turn
		for i := range 6 {
			ts = append(ts, modeltest.ToolCalls(modeltest.Call(fmt.Sprintf("c%d", i), "echo", fmt.Sprintf(`{"text":"%d"}`, i))))
		}
		return append(ts, modeltest.Text("end"))
	}
	cfg := run.Config{Input: []llm.Message{llm.UserText("earlier"), llm.AssistantText("noted")}, Prompt: llm.UserText("go"), MaxTurns: run.Turns(10)}
	want, err := inProcess(t, modeltest.NewScript(turns()...), tools, []string{"echo"}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		carry int
	}{{"inline", 0}, {"by reference", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			script := modeltest.NewScript(turns()...)
			reg := Registry{Models: map[string]model.Model{"m": script}, Tools: tools, Blobs: &MemoryBlobs{}}
			acts, err := newActivities(reg)
			if err != nil {
				t.Fatal(err)
			}
			loads := 0
			mk := func() *testsuiteEnv {
				env := newBareEnv(t)
				RegisterWorkflow(env)
				acts.register(env)
				env.SetOnActivityCompletedListener(func(info *activityInfo, _ converter.EncodedValue, _ error) {
					if info.ActivityType.Name == ActivityLoad {
						loads++
					}
				})
				return env
			}
			in := Input{Model: "m", Tools: []string{"echo"}, Run: cfg, Options: Options{TurnsPerRun: 2, InlineCarryBytes: tc.carry}}
			resp, err, runs := execute(t, mk, in)
			if err != nil {
				t.Fatal(err)
			}
			if runs != 4 {
				t.Fatalf("%d workflow runs, want 4 (7 model calls, 2 per run)", runs)
			}
			if (loads > 0) != (tc.carry == 1) {
				t.Fatalf("%d loads", loads)
			}
			sameResponse(t, want, resp)
		})
	}
}

// A run carried by reference whose blobs are gone fails with a *StoreError
// instead of going on with a wrong history.
func TestContinueAsNewStoreLost(t *testing.T) {
	tools := mustSet(t, echoTool("echo", llm.EffectReadOnly))
	script := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("c1", "echo", `{"text":"x"}`)), modeltest.ToolCalls(modeltest.Call("c2", "echo", `{"text":"y"}`)), modeltest.Text("end"))
	first, err := newActivities(Registry{Models: map[string]model.Model{"m": script}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	mk := func() *testsuiteEnv {
		runs++
		env := newBareEnv(t)
		RegisterWorkflow(env)
		if runs == 1 {
			first.register(env)
		} else {
			// A worker with a store of its own: the blobs are not there.
			other, err := newActivities(Registry{Models: map[string]model.Model{"m": script}, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			other.register(env)
		}
		return env
	}
	in := Input{Model: "m", Tools: []string{"echo"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(5)}, Options: Options{TurnsPerRun: 2, InlineCarryBytes: 1}}
	_, err, _ = execute(t, mk, in)
	var se *StoreError
	if !errors.As(err, &se) || !errors.Is(err, ErrStore) {
		t.Fatalf("error %v, want *StoreError", err)
	}
	contains(t, "error", err.Error(), "durable")
}

// A worker whose store lacks the transcript (another machine) gets the
// whole transcript inline, once, and the run goes on unchanged.
func TestMissingBlobsResent(t *testing.T) {
	tools := mustSet(t, echoTool("echo", llm.EffectReadOnly))
	turns := func() []modeltest.Turn {
		return []modeltest.Turn{
			modeltest.ToolCalls(modeltest.Call("c1", "echo", `{"text":"x"}`)),
			modeltest.ToolCalls(modeltest.Call("c2", "echo", `{"text":"y"}`)),
			modeltest.Text("end"),
		}
	}
	script := modeltest.NewScript(turns()...)
	// Two workers, each with a store of its own, take model calls in turn.
	a, err := newActivities(Registry{Models: map[string]model.Model{"m": script}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	b, err := newActivities(Registry{Models: map[string]model.Model{"m": script}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	env := newBareEnv(t)
	RegisterWorkflow(env)
	env.RegisterActivityWithOptions(a.Tool, activityOptions(ActivityTool))
	env.RegisterActivityWithOptions(a.Describe, activityOptions(ActivityDescribe))
	env.RegisterActivityWithOptions(a.NeedsApproval, activityOptions(ActivityApproval))
	env.RegisterActivityWithOptions(func(ctx context.Context, in modelInput) (modelOutput, error) {
		if n.Add(1)%2 == 0 {
			return b.Model(ctx, in)
		}
		return a.Model(ctx, in)
	}, activityOptions(ActivityModel))
	in := Input{Model: "m", Tools: []string{"echo"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(5)}}
	resp, err, _ := execute(t, func() *testsuiteEnv { return env }, in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := inProcess(t, modeltest.NewScript(turns()...), tools, in.Tools, in.Run, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameResponse(t, want, resp)
	if n.Load() < 4 {
		t.Fatalf("%d model activity attempts: no blob was missed", n.Load())
	}
}

// A result whose messages would be too large for one payload leaves them
// out, and they are fetched by query.
func TestLargeResultFetchedByQuery(t *testing.T) {
	var calls atomic.Int64
	env := newEnv(t, Registry{Models: map[string]model.Model{"m": bulkModel(8, &calls)}, Tools: mustSet(t, bulkTool(5000))})
	rec := newSizeRecorder()
	env.SetDataConverter(rec)
	env.ExecuteWorkflow(WorkflowName, Input{Model: "m", Tools: []string{"bulk"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(9)}, Options: Options{ResultBytes: 10_000}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if biggest, _, _ := rec.stats(); biggest > 20_000 {
		t.Fatalf("a payload of %d bytes: the messages were not left out of the result", biggest)
	}
	var res Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Omitted != 18 || res.Response.Messages != nil || res.Response.Output != "that was a lot" || len(res.Response.Calls) != 9 {
		t.Fatalf("result %+v", res)
	}
	var msgs []llm.Message
	for len(msgs) < res.Omitted {
		v, err := env.QueryWorkflow(QueryMessages, len(msgs))
		if err != nil {
			t.Fatal(err)
		}
		var page MessagePage
		if err := v.Get(&page); err != nil || len(page.Messages) == 0 || page.Total != 18 {
			t.Fatalf("page %+v, %v", page, err)
		}
		msgs = append(msgs, page.Messages...)
	}
	for i := range 8 {
		if r := msgs[2+2*i].ToolResults(); len(r) != 1 || !strings.HasPrefix(r[0].Content, fmt.Sprintf("call %d:", i)) {
			t.Fatalf("message %d: %+v", 2+2*i, r)
		}
	}
	if err := llm.CheckHistory(msgs); err != nil {
		t.Fatal(err)
	}
}
