package runstate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
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

// The agent that wrote the journal fixtures, and that must still resume
// them: its config digest is in every run_created record, so changing
// anything here that the digest covers (model name, system prompt, tool
// specs, limits) makes the fixtures refuse to resume.
const (
	fixtureModel  = "test-model"
	fixtureSystem = "You are terse."
)

// world is what the fixture tools did: one entry per execution.
type world struct {
	mu   sync.Mutex
	ran  []execution
	stop context.CancelFunc // called by a call whose text is "cancel"
}

type execution struct {
	Tool, Args, Key string
}

func (w *world) executions() []execution {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]execution(nil), w.ran...)
}

// count returns how often a tool ran with a key.
func (w *world) count(key string) int {
	n := 0
	for _, e := range w.executions() {
		if e.Key == key {
			n++
		}
	}
	return n
}

// fixtureTool has a fixed, hand-written spec (an inferred schema could
// change with the schema library and with it the config digest) and a
// result that follows from its arguments.
type fixtureTool struct {
	spec llm.ToolSpec
	w    *world
}

func (f fixtureTool) Spec() llm.ToolSpec { return f.spec }

func (f fixtureTool) Call(ctx context.Context, args json.RawMessage) (llm.ToolResult, error) {
	var in struct {
		Path    string `json:"path"`
		Content string `json:"content"`
		Key     string `json:"key"`
		Text    string `json:"text"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return tool.ErrorResult("arguments: " + err.Error()), nil
	}
	f.w.mu.Lock()
	f.w.ran = append(f.w.ran, execution{Tool: f.spec.Name, Args: string(args), Key: agent.IdempotencyKey(ctx)})
	stop := f.w.stop
	f.w.mu.Unlock()
	if in.Text == "cancel" && stop != nil {
		stop()
		<-ctx.Done()
		return tool.ErrorResult("cancelled"), nil
	}
	switch f.spec.Name {
	case "read_file":
		return tool.TextResult(fmt.Sprintf("contents of %s:\nmodule example.com/count", in.Path)), nil
	case "write_file":
		return tool.TextResult(fmt.Sprintf("wrote %d bytes to %s", len(in.Content), in.Path)), nil
	case "upsert_note":
		return tool.TextResult(fmt.Sprintf("note %q saved", in.Key)), nil
	case "delete_file":
		return tool.TextResult("deleted " + in.Path), nil
	}
	return tool.ErrorResult("no such tool"), nil
}

var fixtureSpecs = []llm.ToolSpec{
	{Name: "read_file", Description: "Read a file.", Effect: llm.EffectReadOnly,
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	{Name: "write_file", Description: "Write a file.",
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`)},
	{Name: "upsert_note", Description: "Save a note under a key; saving the same note twice is harmless.", Effect: llm.EffectIdempotent,
		Schema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"},"text":{"type":"string"}},"required":["key","text"]}`)},
	{Name: "delete_file", Description: "Delete a file.", NeedsApproval: true,
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}},"required":["path"]}`)},
}

// clock is a fake clock that advances by a fixed step on every reading,
// so that journal times and the driver's elapsed time are reproducible.
type clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func newClock(start time.Time) *clock { return &clock{t: start, step: 125 * time.Millisecond} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// timedStore stamps appended records with its clock.
type timedStore struct {
	store.Store
	clock *clock
}

func (s timedStore) Append(ctx context.Context, id string, seq int64, recs ...store.Record) (int64, error) {
	recs = append([]store.Record(nil), recs...)
	for i := range recs {
		if recs[i].Time.IsZero() {
			recs[i].Time = s.clock.now()
		}
	}
	return s.Store.Append(ctx, id, seq, recs...)
}

// answers plays a model's answers by turn: the run's turn number, not
// the number of calls, picks the answer, so a resumed run gets the
// answers the original got.
type answers struct {
	mu    sync.Mutex
	turns map[int]modeltest.Turn
	asked []int // turns asked, in order
	reqs  map[int]llm.Request
}

func newAnswers(turns ...modeltest.Turn) *answers {
	a := &answers{turns: map[int]modeltest.Turn{}, reqs: map[int]llm.Request{}}
	for i, t := range turns {
		a.turns[i+1] = t
	}
	return a
}

func (a *answers) hook(_ context.Context, ti agent.TurnInfo, req *llm.Request) (model.Model, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, ti.Turn)
	a.reqs[ti.Turn] = *req
	t, ok := a.turns[ti.Turn]
	if !ok {
		return nil, fmt.Errorf("no answer scripted for turn %d", ti.Turn)
	}
	return modeltest.NewScript(t), nil
}

func (a *answers) calls() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.asked...)
}

func (a *answers) request(turn int) (llm.Request, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.reqs[turn]
	return r, ok
}

// unusedModel is Config.Model: every call goes to the model the turn
// hook returns.
var unusedModel = model.Funcs{GenerateFunc: func(context.Context, llm.Request) (llm.Response, error) {
	return llm.Response{}, fmt.Errorf("the turn hook chooses every model")
}}

// setup is how a scenario's agent differs from the base one, in what the
// config digest does not cover.
type setup struct {
	loopRepeats  int
	outputSchema string
	approver     agent.Approver
}

// newAgent returns the fixture agent. st may be nil (no journal).
func newAgent(t testing.TB, w *world, ans *answers, st store.Store, c *clock, s setup) *agent.Agent {
	t.Helper()
	tools := make([]tool.Tool, len(fixtureSpecs))
	for i, sp := range fixtureSpecs {
		tools[i] = fixtureTool{spec: sp, w: w}
	}
	set, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{
		Model:     unusedModel,
		ModelName: fixtureModel,
		System:    fixtureSystem,
		Tools:     set,
		MaxTokens: 512,
		MaxTurns:  agent.Limit(6),
		TurnHook:  ans.hook,
		Approver:  s.approver,
		LoopGuard: agent.LoopGuard{Repeats: s.loopRepeats},
		Owner:     "fixtures",
		Retry:     model.RetryPolicy{MaxRetries: -1},
		NewID:     func() string { return "run_unnamed" },
	}
	if c != nil {
		cfg.Clock = c.now
	}
	if st != nil {
		cfg.Store = st
	}
	if s.outputSchema != "" {
		var sch jsonschema.Schema
		if err := json.Unmarshal([]byte(s.outputSchema), &sch); err != nil {
			t.Fatal(err)
		}
		cfg.OutputSchema = &sch
	}
	return agent.New(cfg)
}

// suspend is an Approver that suspends every run for decisions.
var suspend = agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) ([]run.Decision, error) {
	return nil, agent.ErrSuspend
})

func toolCalls(u llm.Usage, calls ...llm.ToolCall) modeltest.Turn {
	return modeltest.ToolCalls(calls...).WithUsage(u)
}

func text(u llm.Usage, s string) modeltest.Turn {
	return modeltest.Text(s).WithUsage(u)
}

func usage(in, out int64) llm.Usage { return llm.Usage{InputTokens: in, OutputTokens: out} }

// scenario is one run of the fixture agent whose journal is a fixture.
type scenario struct {
	name      string // the fixture's file stem; the run id is "run_" + name
	prompt    string
	conv      string
	history   []llm.Message // the conversation before the run
	turns     []modeltest.Turn
	setup     setup
	decisions []run.Decision // given to Resume when the run suspends
	cutAfter  string         // keep the journal up to the intent of this call id (a crash)
	start     time.Time
}

func (s scenario) runID() string { return "run_" + s.name }

// The count scenario: a read-only, a destructive and an idempotent call
// in one turn, then the answer.
var countTurns = []modeltest.Turn{
	toolCalls(llm.Usage{InputTokens: 412, OutputTokens: 96, CacheReadTokens: 380},
		modeltest.Call("c1", "read_file", `{"path":"go.mod"}`),
		modeltest.Call("c2", "write_file", `{"path":"count.txt","content":"2"}`),
		modeltest.Call("c3", "upsert_note", `{"key":"count","text":"2 Go files"}`)),
	text(usage(530, 14), "There are 2 Go files; the count is in count.txt."),
}

var scenarios = []scenario{
	{name: "finished", prompt: "Count the Go files and write the count to count.txt.", conv: "conv-1", turns: countTurns,
		start: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)},
	{name: "crashed_in_write", prompt: "Count the Go files and write the count to count.txt.", turns: countTurns, cutAfter: "c2",
		start: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)},
	{name: "crashed_in_upsert", prompt: "Count the Go files and write the count to count.txt.", turns: countTurns, cutAfter: "c3",
		start: time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)},
	{name: "waiting_approval", prompt: "Delete the build and dist directories.", setup: setup{approver: suspend},
		turns: []modeltest.Turn{
			toolCalls(usage(300, 40), modeltest.Call("c1", "delete_file", `{"path":"build"}`), modeltest.Call("c2", "delete_file", `{"path":"dist"}`)),
			text(usage(360, 12), "Deleted build/tmp; dist was kept."),
		},
		start: time.Date(2026, 3, 3, 8, 30, 0, 0, time.UTC)},
	{name: "approved", prompt: "Delete the build and dist directories.", setup: setup{approver: suspend},
		turns: []modeltest.Turn{
			toolCalls(usage(300, 40), modeltest.Call("c1", "delete_file", `{"path":"build"}`), modeltest.Call("c2", "delete_file", `{"path":"dist"}`)),
			text(usage(360, 12), "Deleted build/tmp; dist was kept."),
		},
		decisions: []run.Decision{
			{CallID: "c1", Action: run.Edited, Arguments: `{"path":"build/tmp"}`},
			{CallID: "c2", Action: run.Denied, Reason: "dist is still needed"},
		},
		start: time.Date(2026, 3, 3, 9, 0, 0, 0, time.UTC)},
	{name: "resolved", prompt: "Show go.mod.",
		turns: []modeltest.Turn{
			toolCalls(usage(200, 20), modeltest.Call("c1", "read_fil", `{"path":"go.mod"}`)),
			toolCalls(usage(260, 20), modeltest.Call("c2", "rm_everything", `{}`)),
			text(usage(320, 10), "go.mod declares module example.com/count."),
		},
		start: time.Date(2026, 3, 4, 11, 0, 0, 0, time.UTC)},
	// A run that continues a conversation: its history is in the config.
	{name: "continued", prompt: "And how many test files?", conv: "conv-1",
		history: []llm.Message{
			llm.UserText("Count the Go files and write the count to count.txt."),
			llm.AssistantText("There are 2 Go files; the count is in count.txt."),
		},
		turns: []modeltest.Turn{text(usage(610, 9), "None: there are no _test.go files.")},
		start: time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)},
	// A model that cannot be reached ends the run, resumably: nothing
	// marks the journal as failed.
	{name: "model_error", prompt: "Show go.mod.",
		turns: []modeltest.Turn{
			toolCalls(usage(200, 20), modeltest.Call("c1", "read_file", `{"path":"go.mod"}`)),
			modeltest.Fail(model.KindAuth),
			text(usage(260, 10), "go.mod declares module example.com/count."),
		},
		start: time.Date(2026, 3, 5, 7, 0, 0, 0, time.UTC)},
	// A model that keeps calling a tool that does not exist fails the run
	// for good once the re-prompts are spent.
	{name: "failed", prompt: "Clean up.",
		turns: []modeltest.Turn{
			toolCalls(usage(200, 20), modeltest.Call("c1", "rm_everything", `{}`)),
			toolCalls(usage(240, 20), modeltest.Call("c2", "rm_everything", `{"force":true}`)),
			toolCalls(usage(280, 20), modeltest.Call("c3", "rm_everything", `{"really":true}`)),
		},
		start: time.Date(2026, 3, 5, 8, 0, 0, 0, time.UTC)},
	{name: "wrapped_up", prompt: "Read go.mod until it changes.", setup: setup{loopRepeats: 1},
		turns: []modeltest.Turn{
			toolCalls(usage(200, 20), modeltest.Call("c1", "read_file", `{"path":"go.mod"}`)),
			toolCalls(usage(240, 20), modeltest.Call("c2", "read_file", `{"path":"go.mod"}`)),
			text(usage(280, 15), "go.mod does not change."),
		},
		start: time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)},
	{name: "retried_output", prompt: "How many Go files are there? Answer as JSON.",
		setup: setup{outputSchema: `{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false}`},
		turns: []modeltest.Turn{
			text(usage(150, 5), "two"),
			text(usage(190, 8), `{"count":2}`),
		},
		start: time.Date(2026, 3, 7, 15, 0, 0, 0, time.UTC)},
}

func scenarioNamed(t testing.TB, name string) scenario {
	t.Helper()
	for _, s := range scenarios {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("no scenario %s", name)
	return scenario{}
}
