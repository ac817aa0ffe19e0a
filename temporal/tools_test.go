package temporal

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/tool"
)

// tracer records when tool calls start and end, and how many overlap.
type tracer struct {
	mu      sync.Mutex
	log     []string
	running int
	most    int
}

func (tr *tracer) tool(name string, effect llm.Effect, hold time.Duration) tool.Tool {
	return tool.Func(name, "Holds a while and answers its text.", func(ctx context.Context, in textIn) (string, error) {
		tr.mu.Lock()
		tr.running++
		tr.most = max(tr.most, tr.running)
		tr.log = append(tr.log, "start "+in.Text)
		tr.mu.Unlock()
		select {
		case <-time.After(hold):
		case <-ctx.Done():
		}
		tr.mu.Lock()
		tr.running--
		tr.log = append(tr.log, "end "+in.Text)
		tr.mu.Unlock()
		return in.Text, nil
	}, &tool.FuncOptions[textIn]{Effect: effect})
}

func (tr *tracer) index(entry string) int {
	for i, e := range tr.log {
		if e == entry {
			return i
		}
	}
	return -1
}

func calls(name string, texts ...string) []llm.ToolCall {
	out := make([]llm.ToolCall, len(texts))
	for i, text := range texts {
		out[i] = modeltest.Call(text, name, fmt.Sprintf(`{"text":%q}`, text))
	}
	return out
}

func TestParallelReadOnlyToolsAreBounded(t *testing.T) {
	var tr tracer
	tools := mustSet(t, tr.tool("look", llm.EffectReadOnly, 150*time.Millisecond))
	script := modeltest.NewScript(modeltest.ToolCalls(calls("look", "a", "b", "c", "d", "e")...), modeltest.Text("ok"))
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: tools}
	in := Input{Model: "m", Tools: []string{"look"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(2)}}
	in.Options.ParallelTools = 2
	resp, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, in)
	if err != nil {
		t.Fatal(err)
	}
	if tr.most != 2 {
		t.Fatalf("at most %d read-only calls ran at once, want 2 (ParallelTools): %v", tr.most, tr.log)
	}
	var got []string
	for _, r := range resp.Messages[2].ToolResults() {
		got = append(got, r.CallID+"="+r.Content)
	}
	if strings.Join(got, " ") != "a=a b=b c=c d=d e=e" {
		t.Fatalf("results committed as %v, want call order", got)
	}
}

func TestDestructiveToolsRunAloneInOrder(t *testing.T) {
	var tr tracer
	tools := mustSet(t, tr.tool("look", llm.EffectReadOnly, 100*time.Millisecond), tr.tool("write", llm.EffectDestructive, 20*time.Millisecond))
	turn := append(calls("look", "r1", "r2"), calls("write", "w1", "w2")...)
	turn = append(turn, calls("look", "r3")...)
	script := modeltest.NewScript(modeltest.ToolCalls(turn...), modeltest.Text("ok"))
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: tools}
	in := Input{Model: "m", Tools: []string{"look", "write"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(2)}}
	resp, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, in)
	if err != nil {
		t.Fatal(err)
	}
	if tr.most != 2 {
		t.Fatalf("r1 and r2 did not overlap (most %d): %v", tr.most, tr.log)
	}
	order := func(a, b string) {
		t.Helper()
		if tr.index(a) < 0 || tr.index(b) < 0 || tr.index(a) > tr.index(b) {
			t.Fatalf("%q is not before %q: %v", a, b, tr.log)
		}
	}
	order("end r1", "start w1")
	order("end r2", "start w1")
	order("end w1", "start w2")
	order("end w2", "start r3")
	var got []string
	for _, r := range resp.Messages[2].ToolResults() {
		got = append(got, r.CallID)
	}
	if strings.Join(got, " ") != "r1 r2 w1 w2 r3" {
		t.Fatalf("results committed as %v", got)
	}
}

// A tool whose Go error is the machinery's fails the run, as in-process.
func TestToolMachineryErrorFailsRun(t *testing.T) {
	broken := tool.Wrap(echoTool("disk", llm.EffectDestructive), func(context.Context, json.RawMessage) (llm.ToolResult, error) {
		return llm.ToolResult{}, fmt.Errorf("disk controller on fire")
	})
	script := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("c1", "disk", `{"text":"x"}`)), modeltest.Text("never"))
	var attempts int
	counted := tool.Wrap(broken, func(ctx context.Context, args json.RawMessage) (llm.ToolResult, error) {
		attempts++
		return broken.Call(ctx, args)
	})
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: mustSet(t, counted)}
	_, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, Input{Model: "m", Tools: []string{"disk"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(3)}})
	var te *ToolError
	if !errorsAs(err, &te) || te.Name != "disk" || te.CallID != "c1" || !strings.Contains(te.Message, "on fire") {
		t.Fatalf("error %v, want a *ToolError", err)
	}
	if attempts != 1 {
		t.Fatalf("the tool ran %d times; a machinery error is not retried", attempts)
	}
}

func TestUnknownModelOrTool(t *testing.T) {
	script := modeltest.NewScript(modeltest.Text("never"))
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: mustSet(t, echoTool("echo", llm.EffectReadOnly))}
	for _, in := range []Input{
		{Model: "nope", Run: run.Config{Prompt: llm.UserText("hi")}},
		{Model: "m", Tools: []string{"echo", "grep"}, Run: run.Config{Prompt: llm.UserText("hi")}},
	} {
		_, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, in)
		var ie *InputError
		if !errorsAs(err, &ie) {
			t.Fatalf("input %+v: error %v, want *InputError", in, err)
		}
	}
	if script.Calls() != 0 {
		t.Fatal("the model was called for a run that cannot start")
	}
	for _, in := range []Input{
		{Run: run.Config{Prompt: llm.UserText("hi")}},
		{Model: "m", Run: run.Config{Tools: []llm.ToolSpec{{Name: "echo"}}}},
		{Model: "m", Tools: []string{"echo", "echo"}},
	} {
		var ie *InputError
		if err := in.Validate(); !errorsAs(err, &ie) {
			t.Fatalf("Validate(%+v) = %v, want *InputError", in, err)
		}
	}
}

func TestInvalidToolCallRepairedAndRetried(t *testing.T) {
	tools := mustSet(t, echoTool("echo", llm.EffectReadOnly))
	turns := func() []modeltest.Turn {
		return []modeltest.Turn{
			modeltest.ToolCalls(modeltest.Call("c1", "Echo", `{"text":"x"}`)),         // repaired to echo
			modeltest.ToolCalls(modeltest.Call("c2", "summon_demon", `{"text":"y"}`)), // retried
			modeltest.Text("done"),
		}
	}
	script := modeltest.NewScript(turns()...)
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: tools}
	in := Input{Model: "m", Tools: []string{"echo"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(5), MaxInvalidRetries: 1}}
	resp, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := inProcess(t, modeltest.NewScript(turns()...), tools, in.Tools, in.Run, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameResponse(t, want, resp)
	contains(t, "retry feedback", resp.Messages[4].ToolResults()[0].Content, `no tool named "summon_demon"`)
}
