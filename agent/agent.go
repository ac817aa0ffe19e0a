package agent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/tool"
)

// Agent runs conversations with a model and tools under one Config. Make
// one with New. An Agent is safe for concurrent use: its runs share
// nothing mutable (each has its own run machine, budgets and guards).
type Agent struct {
	cfg      Config
	err      error       // what is wrong with cfg, returned by every run
	model    model.Model // cfg.Model with middleware and retries
	specs    []llm.ToolSpec
	tools    map[string]tool.Tool // wrapped with ToolMiddleware, by name
	orig     map[string]tool.Tool // as given
	output   *outputSchema
	policy   InvalidToolPolicy
	approver Approver
	owner    string
	ttl      time.Duration
	digest   string
	maxTurns int
}

// New returns an agent for cfg. It keeps cfg's values (not copies of what
// they point to). A cfg that cannot work is reported by every run as a
// *ConfigError, before any model call.
func New(cfg Config) *Agent {
	a := &Agent{cfg: cfg, policy: cfg.InvalidToolPolicy, approver: cfg.Approver, owner: cfg.Owner, ttl: cfg.ClaimTTL}
	if a.policy == nil {
		a.policy = DefaultInvalidToolPolicy
	}
	if a.approver == nil {
		a.approver = DenyAll(NotApproved + " (no approver is configured)")
	}
	if a.owner == "" {
		a.owner = defaultOwner()
	}
	if a.ttl <= 0 {
		a.ttl = DefaultClaimTTL
	}
	a.maxTurns = orDefault(cfg.MaxTurns, DefaultMaxTurns)
	a.err = a.check()
	if cfg.Model != nil {
		a.model = a.wrapModel(cfg.Model)
	}
	a.tools = make(map[string]tool.Tool, cfg.Tools.Len())
	a.orig = make(map[string]tool.Tool, cfg.Tools.Len())
	for _, t := range cfg.Tools.Tools() {
		spec := t.Spec()
		if _, ok := t.(tool.Approvable); ok {
			// The machine asks for approval by spec; the driver then asks
			// the tool about each call's arguments and approves those that
			// need none without bothering the Approver.
			spec.NeedsApproval = true
		}
		a.specs = append(a.specs, spec)
		a.orig[spec.Name] = t
		a.tools[spec.Name] = tool.Recover(tool.Chain(t, cfg.ToolMiddleware...))
	}
	if cfg.OutputSchema != nil && a.err == nil {
		a.output, a.err = newOutputSchema(cfg.OutputSchema)
	}
	a.digest = configDigest(a.runConfig(nil, llm.Message{}, nil))
	return a
}

func (a *Agent) check() error {
	c := &a.cfg
	for _, f := range []struct {
		name string
		p    *int
	}{{"MaxTurns", c.MaxTurns}, {"MaxInvalidRetries", c.MaxInvalidRetries}, {"MaxFailedRounds", c.MaxFailedRounds}} {
		if f.p != nil && *f.p < 0 {
			return &ConfigError{Field: f.name, Reason: fmt.Sprintf("%d is negative; use Limit(0) for zero and nil for the default", *f.p)}
		}
	}
	if c.ToolConcurrency < 0 {
		return &ConfigError{Field: "ToolConcurrency", Reason: fmt.Sprintf("%d is negative; use 0 for the default", c.ToolConcurrency)}
	}
	if c.MaxTokens < 0 {
		return &ConfigError{Field: "MaxTokens", Reason: fmt.Sprintf("%d is negative", c.MaxTokens)}
	}
	return c.Budget.check()
}

// wrapModel applies the middleware and the retries to m.
func (a *Agent) wrapModel(m model.Model) model.Model {
	mws := make([]model.Middleware, 0, len(a.cfg.ModelMiddleware)+1)
	mws = append(mws, a.cfg.ModelMiddleware...)
	mws = append(mws, model.Retry(a.cfg.Retry))
	return model.Chain(m, mws...)
}

// runConfig is the machine's config for a run.
func (a *Agent) runConfig(history []llm.Message, prompt llm.Message, out *outputSchema) run.Config {
	c := &a.cfg
	rc := run.Config{
		Model:             c.ModelName,
		System:            c.System,
		Input:             history,
		Prompt:            prompt,
		Tools:             a.specs,
		ToolChoice:        c.ToolChoice,
		MaxTurns:          run.Turns(a.maxTurns),
		MaxInvalidRetries: orDefault(c.MaxInvalidRetries, DefaultMaxInvalidRetries),
		GracefulLastTurn:  c.GracefulLastTurn,
		MaxTokens:         c.MaxTokens,
		Temperature:       c.Temperature,
		TopP:              c.TopP,
	}
	if out != nil {
		rc.Schema = out.shape
	}
	return rc
}

// configDigest identifies what of a run's config must not change between
// the run and its resumption: everything but the conversation and the
// output schema.
func configDigest(rc run.Config) string {
	rc.Input, rc.Prompt, rc.Schema = nil, llm.Message{}, nil
	b, err := json.Marshal(rc)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func (a *Agent) now() time.Time {
	if a.cfg.Clock != nil {
		return a.cfg.Clock()
	}
	return time.Now()
}

func (a *Agent) newID() string {
	if a.cfg.NewID != nil {
		return a.cfg.NewID()
	}
	return "run_" + randomHex(16)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

func defaultOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), randomHex(4))
}

// Input is what one run starts from.
type Input struct {
	// Prompt is the new user message (see Prompt). It may be empty when
	// History already ends with the user's turn.
	Prompt llm.Message
	// History is the conversation before this run, sent with every
	// request. When it is nil and ConversationID is set, the history is
	// loaded from Config.Store.
	History []llm.Message
	// ConversationID, with Config.Store, names the conversation the run
	// belongs to: its history is loaded at the start (unless History is
	// given) and the run's messages are appended to it once: when the run
	// is done, or when it fails for good (turn budget spent, a tool's
	// machinery broken), its prompt and the turns whose calls were all
	// answered, so the next run knows what was asked and done. A run that
	// can still be resumed (cancelled, the model unreachable) appends
	// nothing until it ends.
	ConversationID string
	// RunID names the run; empty means a new id (Config.NewID).
	RunID string
	// Meta, with Config.Store, is the application's own data about the
	// run (any JSON value of at most store.MaxMeta bytes: settings to
	// rebuild the agent with on resume, a user id, labels), kept with the
	// run and returned in store.RunInfo.Meta.
	Meta json.RawMessage
	// OnEvent, when set, gets every event of a Run, on the goroutine that
	// called Run (Stream yields them instead and ignores OnEvent).
	OnEvent func(Event)
}

// Prompt returns an Input holding one user text message.
func Prompt(text string) Input { return Input{Prompt: llm.UserText(text)} }

// Result is the outcome of a completed run.
type Result struct {
	RunID string `json:"run_id"`
	// Output is the text of the final answer.
	Output string `json:"output"`
	// Message is the final assistant message.
	Message llm.Message `json:"message"`
	// Messages are the run's new messages, the prompt first, History
	// excluded.
	Messages []llm.Message `json:"messages"`
	// Usage sums every model call, retried turns included.
	Usage llm.Usage `json:"usage,omitzero"`
	// CostUSD is what the calls cost by the budget's price table, 0 when
	// a model's price is unknown.
	CostUSD float64 `json:"cost_usd,omitempty"`
	// Calls has one record per model call.
	Calls []run.CallRecord `json:"calls"`
}

// Run runs the agent on in until the model gives a final answer, and
// returns it. Events go to in.OnEvent. A run that does not complete
// returns a *RunError (its Snapshot set when it can be resumed), a
// *SuspendedError when it waits for approval, or a *ConfigError.
func (a *Agent) Run(ctx context.Context, in Input) (Result, error) {
	return a.runWith(ctx, in, a.output)
}

func (a *Agent) runWith(ctx context.Context, in Input, out *outputSchema) (Result, error) {
	x, err := a.newRun(ctx, in, out, observer(in.OnEvent), unary{})
	if err != nil {
		return Result{}, err
	}
	return x.drive(ctx)
}

func observer(fn func(Event)) func(Event) bool {
	return func(e Event) bool {
		if fn != nil {
			fn(e)
		}
		return true
	}
}

// Stream runs the agent on in like Run, streaming the model's answers,
// and yields the run's events as they happen: Done (carrying the Result)
// last when the run completes, or a nil event with the error Run would
// have returned. Breaking out of the loop cancels the run (it can be
// resumed like a cancelled one). Each range starts a new run.
func (a *Agent) Stream(ctx context.Context, in Input) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		emit := func(e Event) bool { return yield(e, nil) }
		x, err := a.newRun(ctx, in, a.output, emit, streaming{})
		if err != nil {
			yield(nil, err)
			return
		}
		if _, err := x.drive(ctx); err != nil && !x.stopped {
			yield(nil, err)
		}
	}
}

// Resumption says which run Agent.Resume continues, and with what.
type Resumption struct {
	// RunID names the run to resume from Config.Store's journal.
	RunID string
	// Snapshot is the state of a run to resume without a Store: the
	// Snapshot of a *RunError or *SuspendedError.
	Snapshot json.RawMessage
	// Decisions answer the calls a suspended run waits for (one per call
	// of the *SuspendedError). Calls they do not cover go to the
	// Approver; if it suspends the run again, give all decisions next
	// time (partial ones are not kept). A decision for a call that does
	// not wait is refused with a *ResumeError before anything runs.
	Decisions []run.Decision
	// OnEvent gets the events of Resume (ResumeStream yields them).
	OnEvent func(Event)
}

// Resume continues a run that was suspended, interrupted or cancelled,
// from its journal in Config.Store (by RunID) or from a Snapshot, and
// drives it to the end like Run. A run that is already done returns its
// Result again.
//
// With a Store, the run is claimed first: while another process drives
// it, Resume fails with an error matching store.ErrClaimed. Tool calls
// that were started but never recorded as finished are run again only if
// their tool is read-only or idempotent; the others are answered with
// InterruptedMaybe, telling the model they may or may not have taken
// effect.
func (a *Agent) Resume(ctx context.Context, res Resumption) (Result, error) {
	x, err := a.resume(ctx, res, observer(res.OnEvent), unary{})
	if err != nil {
		return Result{}, err
	}
	return x.drive(ctx)
}

// ResumeStream is Resume streaming like Stream.
func (a *Agent) ResumeStream(ctx context.Context, res Resumption) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		emit := func(e Event) bool { return yield(e, nil) }
		x, err := a.resume(ctx, res, emit, streaming{})
		if err != nil {
			yield(nil, err)
			return
		}
		if _, err := x.drive(ctx); err != nil && !x.stopped {
			yield(nil, err)
		}
	}
}
