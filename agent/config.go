package agent

import (
	"context"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/tool"
)

// Defaults of a zero Config.
const (
	DefaultMaxTurns          = 20 // model calls per run
	DefaultMaxInvalidRetries = 2  // re-prompts after invalid tool calls per run
	DefaultMaxFailedRounds   = 3  // tool rounds in a row where every call failed
	DefaultReadOnlyParallel  = 8  // read-only calls run at once by default
	DefaultLoopRepeats       = 3  // identical calls before the loop guard nudges
	DefaultClaimTTL          = time.Minute
)

// Limit returns a pointer to n, for the *int limits of Config, where nil
// means the default and Limit(0) means zero.
func Limit(n int) *int { return &n }

// Config configures an Agent. The zero value is usable except that a run
// needs a Model (a nil one is a *ConfigError at Run). Setting a field never
// changes another: there are no hidden couplings.
//
// Everything here is shared by the agent's runs, so the Model, tools,
// middleware, hooks, Approver, policy and Store must be safe for
// concurrent use.
type Config struct {
	// Model answers the calls. It is wrapped with ModelMiddleware and,
	// innermost, model.Retry(Retry).
	Model model.Model
	// ModelName is sent as llm.Request.Model (the adapter's default when
	// empty) and prices the run's cost when the provider does not name the
	// model it used.
	ModelName string
	// System is the system prompt.
	System string
	// Tools are the tools the model may call, advertised on every turn.
	Tools *tool.Set
	// ToolChoice applies to every turn but a tool-free final one.
	ToolChoice llm.ToolChoice
	// MaxTokens, Temperature and TopP are passed to every request.
	MaxTokens   int
	Temperature *float64
	TopP        *float64

	// MaxTurns is the exact number of model calls a run may make, re-prompts
	// included (see package run): nil means DefaultMaxTurns, Limit(0)
	// allows none.
	MaxTurns *int
	// GracefulLastTurn makes the last allowed call tool-free, so that its
	// text ends the run instead of the run failing with run.ErrMaxTurns.
	GracefulLastTurn bool

	// ToolConcurrency bounds how many calls of one turn run at once.
	// 0 means: read-only calls (llm.EffectReadOnly) in parallel, up to
	// DefaultReadOnlyParallel, and every other call alone, after the calls
	// before it and before the calls after it. N > 0 runs up to N calls of
	// any kind at once, started in call order. Results are committed in
	// call order either way.
	ToolConcurrency int
	// ToolMiddleware wraps every tool call, the first outermost. A
	// middleware may rewrite arguments or results, return a *SkipError
	// (Skip) to answer without running the tool, or a *StopError (Stop)
	// to end the run.
	ToolMiddleware []tool.Middleware

	// Approver decides about calls that need approval (see Approver).
	// Nil denies them, with a reason the model reads.
	Approver Approver
	// InvalidToolPolicy decides what to do with a call of a tool that is
	// not allowed. Nil is DefaultInvalidToolPolicy.
	InvalidToolPolicy InvalidToolPolicy
	// MaxInvalidRetries is how many times a run re-prompts the model after
	// an invalid tool call: nil means DefaultMaxInvalidRetries.
	MaxInvalidRetries *int
	// MaxFailedRounds stops the run with *ToolFailuresError after that
	// many tool rounds in a row in which every call failed: nil means
	// DefaultMaxFailedRounds, Limit(0) never stops.
	MaxFailedRounds *int

	// Budget limits tokens, cost, time and tool calls; the zero Budget
	// limits nothing.
	Budget Budget
	// LoopGuard catches the model repeating one call.
	LoopGuard LoopGuard

	// OutputSchema, when set, asks for a final answer that is JSON
	// matching it: the provider is asked natively where it can be, the
	// answer is validated, and a non-matching one is sent back with the
	// validation error while turns remain. See also RunAs.
	OutputSchema *jsonschema.Schema

	// ModelMiddleware wraps the model for every call, the first outermost
	// (outside the retries).
	ModelMiddleware []model.Middleware
	// TurnHook, when set, is called before every model call: it may patch
	// the request (what is sent, not the run's history) or return another
	// model for this call.
	TurnHook TurnHook
	// Retry is the retry policy of model calls (model.Retry); its zero
	// value is the default policy, and MaxRetries < 0 turns retries off.
	// It also bounds how often a stream that failed after sending output
	// is restarted (TurnRestarted).
	Retry model.RetryPolicy

	// Store, when set, journals every step of every run so that a run can
	// be resumed by id in another process (see Agent.Resume), and keeps
	// conversations (Input.ConversationID).
	Store store.Store
	// Owner names this process in the Store's claims; empty means one
	// made from the host name and process id.
	Owner string
	// ClaimTTL is how long a claim on a run lasts unless renewed (the
	// driver renews it as it goes): 0 means DefaultClaimTTL.
	ClaimTTL time.Duration

	// Clock returns the current time, for budgets and records; nil means
	// time.Now.
	Clock func() time.Time
	// NewID returns a new run id; nil means random ids ("run_" and 32
	// hex digits).
	NewID func() string
}

// TurnHook is called before each model call with the request the run
// machine built. It may modify *req: the change affects what is sent for
// this call only, not the run's history (the slices in req are shared
// with the run: replace them, never modify their elements). It may
// return a model to use for this call instead of Config.Model (it is
// wrapped with the same middleware and retries), or nil to keep it.
// Returning an error ends the run with it; return a *StopError (Stop) to
// stop it on purpose.
type TurnHook func(ctx context.Context, turn TurnInfo, req *llm.Request) (model.Model, error)

// TurnInfo says which model call a TurnHook is about.
type TurnInfo struct {
	RunID string
	Turn  int  // 1-based
	Final bool // a tool-free last call
}

// LoopGuard catches a model that calls the same tool with the same
// arguments again and again.
type LoopGuard struct {
	// Repeats is K: at the K-th identical call the model gets a note
	// telling it so; at 2K the run asks for a tool-free final answer.
	// 0 means DefaultLoopRepeats; a negative value turns the guard off.
	Repeats int
}

func (g LoopGuard) repeats() int {
	switch {
	case g.Repeats == 0:
		return DefaultLoopRepeats
	case g.Repeats < 0:
		return 0
	}
	return g.Repeats
}

func orDefault(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}
