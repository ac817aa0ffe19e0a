package run

import (
	"github.com/loomkit/loom/llm"
)

// State names, as returned by Run.State and written in snapshots.
const (
	StatePreparingRequest   = "PreparingRequest"
	StateAwaitingModel      = "AwaitingModel"
	StateResolvingToolCalls = "ResolvingToolCalls"
	StateAwaitingApproval   = "AwaitingApproval"
	StateAwaitingAdvance    = "AwaitingAdvance"
	StateExecutingTools     = "ExecutingTools"
	StateDone               = "Done"
	StateFailed             = "Failed"
)

type state uint8

const (
	statePreparing state = iota
	stateAwaitingModel
	stateResolving
	stateApproving
	stateAdvance
	stateExecuting
	stateDone
	stateFailed
)

var stateNames = [...]string{
	statePreparing:     StatePreparingRequest,
	stateAwaitingModel: StateAwaitingModel,
	stateResolving:     StateResolvingToolCalls,
	stateApproving:     StateAwaitingApproval,
	stateAdvance:       StateAwaitingAdvance,
	stateExecuting:     StateExecutingTools,
	stateDone:          StateDone,
	stateFailed:        StateFailed,
}

func (s state) String() string { return stateNames[s] }

// Run is one agent run: a state machine that makes every decision of the
// agent loop and does no IO. See the package doc for the protocol.
//
// A Run is not safe for concurrent use; a driver owns it. Encode it with
// json.Marshal at any state and restore it with json.Unmarshal into a new
// Run (the zero Run is only good for that).
type Run struct {
	cfg   Config
	rules rules
	state state
	err   error // why the run failed, in stateFailed

	// hist is Config.Input followed by the run's messages, in one backing
	// array that only grows: requests hand out capped prefixes of it, so
	// committed elements are never modified.
	hist     []llm.Message
	inputLen int
	ids      map[string]struct{} // every tool-call id in hist and the current turn

	turn    int // model calls emitted
	retries int // Retry resolutions accepted
	usage   llm.Usage
	calls   []CallRecord

	wrap       bool   // the next model call is final (WrapUp, RetryTurn of a final turn)
	wrapReason string // the note sent with it
	final      bool   // the awaited call is final

	mt      *modelTurn    // the answer in ResolvingToolCalls, AwaitingApproval, AwaitingAdvance
	pending []PendingCall // in ExecutingTools
	done    *Done         // in Done
}

// New starts a run with cfg. It copies cfg.Input and never modifies it. An
// invalid cfg gives a run that has already failed: its first Next returns a
// *FailedError wrapping the *ConfigError, before any model call.
func New(cfg Config) *Run {
	r := &Run{cfg: cfg}
	r.hist = make([]llm.Message, 0, len(cfg.Input)+8)
	r.hist = append(r.hist, cfg.Input...)
	r.inputLen = len(cfg.Input)
	r.cfg.Input = r.hist[:r.inputLen:r.inputLen]
	if len(cfg.Prompt.Parts) > 0 {
		r.hist = append(r.hist, cfg.Prompt)
	}
	ru, err := r.cfg.check()
	if err == nil {
		if herr := llm.CheckHistory(r.hist); herr != nil {
			err = &ConfigError{Field: "Input", Reason: herr.Error()}
		}
	}
	if err != nil {
		r.state, r.err = stateFailed, err
		return r
	}
	r.rules = ru
	r.ids = make(map[string]struct{})
	for _, m := range r.hist {
		r.noteIDs(m)
	}
	return r
}

// noteIDs adds the tool-call ids of m to the set of used ids.
func (r *Run) noteIDs(m llm.Message) {
	for _, p := range m.Parts {
		if c, ok := p.(llm.ToolCall); ok && c.ID != "" {
			r.ids[c.ID] = struct{}{}
		}
	}
}

// State returns the name of the run's state (one of the State constants).
func (r *Run) State() string { return r.state.String() }

// Turn returns the number of model calls emitted so far.
func (r *Run) Turn() int { return r.turn }

// Usage returns the usage summed over every recorded model call.
func (r *Run) Usage() llm.Usage { return r.usage }

// Calls returns one record per model answer fed so far. Shared with the
// run: do not modify.
func (r *Run) Calls() []CallRecord { return r.calls[:len(r.calls):len(r.calls)] }

// Messages returns the run's new messages (Config.Input excluded). Shared
// with the run: do not modify.
func (r *Run) Messages() []llm.Message {
	n := len(r.hist)
	return r.hist[r.inputLen:n:n]
}

// History returns Config.Input followed by the run's new messages. Shared
// with the run: do not modify.
func (r *Run) History() []llm.Message {
	n := len(r.hist)
	return r.hist[:n:n]
}

// Pending returns the tool calls awaiting results in ExecutingTools, and
// nil in any other state. Shared with the run: do not modify.
func (r *Run) Pending() []PendingCall {
	if r.state != stateExecuting {
		return nil
	}
	return r.pending
}

// ModelCall returns the model call the run awaits in AwaitingModel: a
// driver that restored a run saved there makes this call (Next would be a
// protocol error, since the turn was already emitted).
func (r *Run) ModelCall() (CallModel, bool) {
	if r.state != stateAwaitingModel {
		return CallModel{}, false
	}
	return r.callModel(), true
}

// Response returns the run's outcome once it is Done.
func (r *Run) Response() (Response, bool) {
	if r.state != stateDone {
		return Response{}, false
	}
	return r.done.Response, true
}

// Err returns the error that failed the run, or nil.
func (r *Run) Err() error {
	if r.state != stateFailed {
		return nil
	}
	return r.err
}

// Config returns the run's config. Its slices are shared with the run: do
// not modify.
func (r *Run) Config() Config { return r.cfg }

// callModel builds the request for the awaited (or about to be emitted)
// turn. It copies no history: Messages is a capped prefix of hist.
func (r *Run) callModel() CallModel {
	n := len(r.hist)
	c := &r.cfg
	req := llm.Request{
		Model:       c.Model,
		System:      c.System,
		Messages:    r.hist[:n:n],
		Tools:       c.Tools,
		ToolChoice:  c.ToolChoice,
		MaxTokens:   c.MaxTokens,
		Temperature: c.Temperature,
		TopP:        c.TopP,
		Stop:        c.Stop,
		Schema:      c.Schema,
	}
	if r.final {
		// The tools stay advertised: a history holding tool calls is
		// refused by some providers (Anthropic) when no tools are
		// declared. Tool choice none forbids new calls, and any call the
		// model makes anyway is dropped by ModelResponse.
		req.ToolChoice = llm.ToolChoice{Mode: llm.ToolNone}
	}
	return CallModel{Turn: r.turn, Request: req, Final: r.final}
}
