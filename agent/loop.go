package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
)

// runner drives one run: the one loop behind Run, Stream, Resume and
// ResumeStream. It asks the machine what to do, does the IO, and feeds
// the outcome back; it decides nothing the machine decides.
type runner struct {
	a      *Agent
	id     string
	r      *run.Run
	src    turnSource
	output *outputSchema
	j      *journal // nil without a Store
	conv   string   // conversation id, with a Store

	emitf   func(Event) bool
	stopped bool // the consumer stopped listening
	cancel  context.CancelFunc

	led       ledger
	start     time.Time // when this drive started, for the time budget
	turn      int       // the model call in progress, for retry events
	outErr    error     // the final answer's mismatch with the output schema
	decisions []run.Decision
	resumed   bool

	// What a replayed journal knows of the batch in progress.
	recIntents map[string]bool
	recResults map[string]llm.ToolResult
	failed     string // the run_failed record's error

	costCalls int // run.Calls priced so far
	cost      float64
	costKnown bool
	priceName string // the last model priced, and its price
	price     Price
	priceOK   bool
}

// ledger is what the driver itself keeps of a run, beyond the machine:
// what budgets and guards count. It travels in snapshots and in journal
// notes, so resumed runs count on.
type ledger struct {
	ToolCalls    int            `json:"tool_calls,omitempty"`
	Repeats      map[string]int `json:"repeats,omitempty"`
	FailedRounds int            `json:"failed_rounds,omitempty"`
	// InvalidRetries counts the run.Retry resolutions the machine accepted.
	InvalidRetries int           `json:"invalid_retries,omitempty"`
	Warned         []string      `json:"warned,omitempty"`
	WrappedUp      bool          `json:"wrapped_up,omitempty"`
	Elapsed        time.Duration `json:"elapsed_ns,omitempty"`
}

func (l ledger) clone() ledger {
	if l.Repeats != nil {
		m := make(map[string]int, len(l.Repeats))
		for k, v := range l.Repeats {
			m[k] = v
		}
		l.Repeats = m
	}
	l.Warned = append([]string(nil), l.Warned...)
	return l
}

// newRun starts a new run of in.
func (a *Agent) newRun(ctx context.Context, in Input, out *outputSchema, emit func(Event) bool, src turnSource) (*runner, error) {
	if a.err != nil {
		return nil, a.err
	}
	if a.model == nil {
		return nil, &ConfigError{Field: "Model", Reason: "is nil; set Config.Model to a model.Model (an adapter such as model/openai, or modeltest.Script in tests)"}
	}
	if in.ConversationID != "" && a.cfg.Store == nil {
		return nil, &ConfigError{Field: "Input.ConversationID", Reason: "is set but Config.Store is nil; conversations live in the store"}
	}
	if in.Meta != nil {
		switch {
		case a.cfg.Store == nil:
			return nil, &ConfigError{Field: "Input.Meta", Reason: "is set but Config.Store is nil; it is kept with the run in the store"}
		case !json.Valid(in.Meta):
			return nil, &ConfigError{Field: "Input.Meta", Reason: "is not valid JSON"}
		case len(in.Meta) > store.MaxMeta:
			return nil, &ConfigError{Field: "Input.Meta", Reason: fmt.Sprintf("holds %d bytes, more than the store's limit of %d", len(in.Meta), store.MaxMeta)}
		}
	}
	x := &runner{a: a, id: in.RunID, src: src, output: out, emitf: emit, conv: in.ConversationID}
	if x.id == "" {
		x.id = a.newID()
	}
	history := in.History
	if history == nil && in.ConversationID != "" {
		h, err := a.cfg.Store.History(ctx, in.ConversationID)
		if err != nil {
			return nil, &CheckpointError{Op: "load conversation " + in.ConversationID, Err: err}
		}
		history = h
	}
	rc := a.runConfig(history, in.Prompt, out)
	x.r = run.New(rc)
	if err := x.r.Err(); err != nil {
		return nil, &ConfigError{Field: "Input", Reason: err.Error()}
	}
	x.start = a.now()
	if a.cfg.Store != nil {
		j, err := createJournal(ctx, a, x.id, rc, in)
		if err != nil {
			return nil, err
		}
		x.j = j
	}
	x.emit(RunStarted{RunID: x.id})
	return x, nil
}

// emit passes e on, and notices a consumer that stopped listening.
func (x *runner) emit(e Event) {
	if x.stopped {
		return
	}
	if !x.emitf(e) {
		x.stopped = true
		if x.cancel != nil {
			x.cancel()
		}
	}
}

var errConsumerGone = errors.New("agent: the consumer of the event stream stopped listening")

// drive runs the loop to the end.
func (x *runner) drive(parent context.Context) (Result, error) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	x.cancel = func() { cancel(errConsumerGone) }
	if x.stopped { // RunStarted was refused
		x.cancel()
	}
	if x.j != nil {
		defer x.j.keepAlive(ctx, x.a, cancel)()
	}
	for {
		if x.stopped {
			return Result{}, x.end(ctx, errConsumerGone)
		}
		if err := ctx.Err(); err != nil {
			return Result{}, x.end(ctx, err)
		}
		if x.r.State() == run.StatePreparingRequest {
			if err := x.checkLimits(ctx); err != nil {
				return Result{}, x.end(ctx, err)
			}
		}
		var step run.Step
		if cm, ok := x.r.ModelCall(); ok { // restored while the model was awaited
			step = cm
		} else {
			var err error
			if step, err = x.r.Next(); err != nil {
				return Result{}, x.end(ctx, err)
			}
		}
		var err error
		switch s := step.(type) {
		case run.CallModel:
			err = x.callModel(ctx, s)
		case run.ResolveToolCall:
			err = x.resolve(ctx, s)
		case run.ApproveTools:
			err = x.approve(ctx, s)
		case run.CallTools:
			err = x.callTools(ctx, s)
		case run.Done:
			return x.done(ctx, s)
		}
		if err != nil {
			return Result{}, x.end(ctx, err)
		}
	}
}

// callModel makes one model call and feeds the answer to the machine.
func (x *runner) callModel(ctx context.Context, s run.CallModel) error {
	req := s.Request
	m := x.a.model
	if hook := x.a.cfg.TurnHook; hook != nil {
		swap, err := hook(ctx, TurnInfo{RunID: x.id, Turn: s.Turn, Final: s.Final}, &req)
		if err != nil {
			return err
		}
		if swap != nil {
			m = x.a.wrapModel(swap)
		}
		if err := llm.CheckHistory(req.Messages); err != nil {
			return fmt.Errorf("agent: the TurnHook's request would be refused by the provider: %w", err)
		}
	}
	x.turn = s.Turn
	resp, err := x.callWithRestarts(ctx, m, req, s.Turn)
	if err != nil {
		return err
	}
	if err := x.r.ModelResponse(resp); err != nil {
		return err
	}
	if err := x.j.modelTurn(ctx, x, s.Turn, resp); err != nil {
		return err
	}
	cost, err := x.costSoFar()
	if err != nil {
		return err
	}
	x.emit(Usage{Turn: s.Turn, Usage: resp.Usage, Total: x.r.Usage(), CostUSD: cost})
	if x.output != nil && x.r.State() == run.StateAwaitingAdvance && (s.Final || len(resp.ToolCalls()) == 0) {
		return x.checkOutput(ctx, resp.Message.Text())
	}
	return nil
}

// checkOutput validates a final answer; a mismatch is sent back while
// turns remain.
func (x *runner) checkOutput(ctx context.Context, text string) error {
	_, verr := x.output.check(text)
	x.outErr = nil
	if verr == nil {
		return nil
	}
	if x.r.Turn() >= x.a.maxTurns {
		x.outErr = &OutputError{Output: text, Err: verr}
		return nil
	}
	fb := outputFeedback(verr)
	if err := x.r.RetryTurn(fb); err != nil {
		return err
	}
	if err := x.j.note(ctx, x, noteRecord{Type: noteRetryTurn, Turn: x.r.Turn(), Text: fb}); err != nil {
		return err
	}
	x.emit(Note{Turn: x.r.Turn(), Reason: "output", Text: fb})
	return nil
}

// costSoFar prices the run's model calls not priced yet.
func (x *runner) costSoFar() (float64, error) {
	calls := x.r.Calls()
	b := &x.a.cfg.Budget
	for ; x.costCalls < len(calls); x.costCalls++ {
		c := calls[x.costCalls]
		name := c.Model
		if name == "" {
			name = x.a.cfg.ModelName
		}
		if name != x.priceName || x.costCalls == 0 {
			x.priceName = name
			x.price, x.priceOK = b.PriceOf(name)
		}
		p, ok := x.price, x.priceOK
		if !ok {
			if b.MaxCostUSD > 0 {
				return 0, &BudgetError{Limit: "cost", Reason: fmt.Sprintf("the cost budget cannot be enforced: no price is known for model %q; add it to Budget.Prices", name)}
			}
			x.costKnown = false
			x.costCalls = len(calls)
			return 0, nil
		}
		if x.costCalls == 0 {
			x.costKnown = true
		}
		x.cost += p.Cost(c.Usage)
	}
	if !x.costKnown {
		return 0, nil
	}
	return x.cost, nil
}

// resolve asks the policy about an invalid tool call.
func (x *runner) resolve(ctx context.Context, s run.ResolveToolCall) error {
	rc := x.r.Config()
	left := rc.MaxInvalidRetries - x.led.InvalidRetries
	res := x.a.policy.Resolve(ctx, InvalidCall{RunID: x.id, ResolveToolCall: s, RetriesLeft: max(left, 0)})
	if res == nil {
		res = run.Fail{}
	}
	x.emit(InvalidToolCall{Turn: s.Turn, Call: s.Call, Resolution: res})
	if err := x.applyResolution(res); err != nil {
		return err
	}
	if err := x.j.resolution(ctx, x, s.Turn, s.Call.ID, res); err != nil {
		return err
	}
	if _, ok := res.(run.Retry); ok {
		x.reportAnswered(s.Turn)
	}
	return nil
}

// reportAnswered reports the calls of a turn the machine answered as a
// whole without running any (a Retry of an invalid call): each call, then
// each result as the history holds it, the way callTools reports a turn,
// so that a consumer sees every call the model made answered.
func (x *runner) reportAnswered(turn int) {
	msgs := x.r.Messages()
	if len(msgs) < 2 {
		return
	}
	calls, results := msgs[len(msgs)-2].ToolCalls(), msgs[len(msgs)-1].ToolResults()
	if len(calls) != len(results) {
		return
	}
	for _, c := range calls {
		x.emit(ToolCall{Turn: turn, Call: c, Preresolved: true})
	}
	for i, c := range calls {
		x.emit(ToolResult{Turn: turn, Call: c, Result: results[i]})
	}
}

// applyResolution feeds a resolution to the machine and counts retries.
func (x *runner) applyResolution(res run.Resolution) error {
	if err := x.r.Resolve(res); err != nil {
		return err
	}
	if _, ok := res.(run.Retry); ok {
		x.led.InvalidRetries++
	}
	return nil
}

// done finishes a run: the result is journaled, appended to the
// conversation, and returned.
func (x *runner) done(ctx context.Context, s run.Done) (Result, error) {
	if x.outErr != nil {
		return Result{}, x.end(ctx, x.outErr)
	}
	cost, _ := x.costSoFar()
	res := Result{
		RunID:    x.id,
		Output:   s.Output,
		Message:  s.Message,
		Messages: s.Messages,
		Usage:    s.Usage,
		CostUSD:  cost,
		Calls:    s.Calls,
	}
	if err := x.j.finish(ctx, x, res); err != nil {
		return Result{}, x.end(ctx, err)
	}
	x.emit(Done{Result: res})
	return res, nil
}

// end closes a run that did not complete and says why.
func (x *runner) end(ctx context.Context, err error) error {
	var susp *SuspendedError
	if errors.As(err, &susp) {
		x.j.release(ctx)
		return susp
	}
	if x.stopped {
		err = errConsumerGone
	} else if ctx.Err() != nil {
		// A cause of the driver's own (a lost claim) says more than the
		// cancellation it caused.
		// It still wraps the cancellation, so a run cancelled with a cause
		// of the caller's stays resumable.
		if cause := context.Cause(ctx); cause != ctx.Err() && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%w)", cause, ctx.Err())
		}
	}
	re := &RunError{RunID: x.id, Err: err}
	if resumable(err) && x.r.Err() == nil && x.r.State() != run.StateDone {
		re.Snapshot = x.snapshot()
	} else {
		x.j.fail(ctx, x, err)
	}
	x.j.release(ctx)
	return re
}

// resumable reports whether a run that ended with err may be continued:
// cancelled, the model unreachable, the checkpoint unwritable, or the
// approval not given in a usable form (the run still waits for it).
func resumable(err error) bool {
	var me *model.Error
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, errConsumerGone) || errors.As(err, &me) || errors.Is(err, ErrCheckpoint) ||
		errors.Is(err, store.ErrClaimed) || errors.Is(err, ErrApproval) || errors.Is(err, ErrResume)
}

// elapsed is the time the run has been driven.
func (x *runner) elapsed() time.Duration {
	return x.led.Elapsed + x.a.now().Sub(x.start)
}

func (x *runner) spent() spent {
	cost, _ := x.costSoFar()
	return spent{tokens: x.r.Usage().Total(), cost: cost, elapsed: x.elapsed(), toolCalls: x.led.ToolCalls}
}

// checkLimits runs before each model call: a reached budget or a model
// stuck in a loop makes the next call the last, without tools (or fails
// the run with Budget.Fail).
func (x *runner) checkLimits(ctx context.Context) error {
	if x.led.WrappedUp {
		return nil
	}
	b := &x.a.cfg.Budget
	var reason string
	for _, l := range b.states(x.spent()) {
		if l.used >= l.max {
			if b.Fail {
				return &BudgetError{Limit: l.name, Max: l.max, Used: l.used}
			}
			reason = hardNote(l)
			break
		}
	}
	if reason == "" {
		if k := x.a.cfg.LoopGuard.repeats(); k > 0 {
			for _, n := range x.led.Repeats {
				if n >= 2*k {
					reason = fmt.Sprintf("You have made the same tool call with the same arguments %d times, so tools are no longer available. Give your final answer now with what you have.", n)
					break
				}
			}
		}
	}
	if reason == "" {
		return nil
	}
	if err := x.r.WrapUp(reason); err != nil {
		return err
	}
	x.led.WrappedUp = true
	x.led.Elapsed = x.elapsed()
	x.start = x.a.now()
	if err := x.j.note(ctx, x, noteRecord{Type: noteWrapUp, Turn: x.r.Turn(), Text: reason, Ledger: ledgerPtr(x.led)}); err != nil {
		return err
	}
	kind := "budget"
	if strings.Contains(reason, "same tool call") {
		kind = "loop"
	}
	x.emit(Note{Turn: x.r.Turn(), Reason: kind, Text: reason, WrapUp: true})
	return nil
}

func ledgerPtr(l ledger) *ledger {
	c := l.clone()
	return &c
}

// snapshot encodes the run for Resume without a Store.
func (x *runner) snapshot() json.RawMessage {
	led := x.led.clone()
	led.Elapsed = x.elapsed()
	b, err := json.Marshal(snapshot{Format: SnapshotFormat, RunID: x.id, Digest: x.a.digest, Run: x.r, Ledger: led})
	if err != nil {
		return nil
	}
	return b
}
