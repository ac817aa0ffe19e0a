package temporal

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
)

// errCancelled unwinds the workflow's loop once its context is cancelled.
var errCancelled = errors.New("workflow cancelled")

// runner is the state of one workflow run. Everything in it is workflow
// state: it changes only in workflow code (the loop, and the update
// handler), deterministically.
type runner struct {
	ctx  workflow.Context
	in   Input
	opts Options
	wfID string

	r              *run.Run
	ts             transcriptState
	invalidRetries int
	runs           int
	turnsThisRun   int
	events         eventLog
	approval       *approvalWait
	decided        []string // call ids decided in this workflow run
	running        []llm.ToolCall
	failure        string
	byArgs         []string       // tools whose calls need approval by their arguments
	verdicts       []callApproval // their verdicts on the calls of the last answer
	// The history's size and length when the loop started (after the
	// carried state was loaded).
	startSize, startLength int
}

// Workflow drives one run.Run to its end: the workflow registered as
// WorkflowName by NewWorker and Register. Its result is a Result holding
// the run's run.Response; its failures are application errors whose type says what
// failed (see ErrorTypeModelPrefix and the others, and Handle.Result for
// the typed errors they become); a cancelled run ends cancelled with the
// messages so far as details (see CancelledError).
func Workflow(ctx workflow.Context, in Input) (Result, error) {
	w := &runner{ctx: ctx, in: in, opts: in.Options.withDefaults(), wfID: workflow.GetInfo(ctx).WorkflowExecution.ID, runs: 1}
	if err := w.handlers(); err != nil {
		return Result{}, err
	}
	if err := in.Validate(); err != nil {
		return w.fail(err)
	}
	if err := w.setup(); err != nil {
		if w.ctx.Err() != nil {
			return w.cancelled()
		}
		return w.fail(err)
	}
	return w.loop()
}

func (w *runner) emit(e Event) {
	e.Time = workflow.Now(w.ctx)
	w.events.add(e)
}

// setup makes the run: from the carried state of the run before, or new
// with the specs of the named tools.
func (w *runner) setup() error {
	if c := w.in.Resume; c != nil {
		return w.restore(c)
	}
	actx := workflow.WithActivityOptions(w.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5, NonRetryableErrorTypes: []string{ErrorTypeInput}},
	})
	var d describeOutput
	if err := workflow.ExecuteActivity(actx, ActivityDescribe, describeInput{Model: w.in.Model, Tools: w.in.Tools}).Get(w.ctx, &d); err != nil {
		return err
	}
	w.byArgs = d.ByArguments
	cfg := w.in.Run
	cfg.Tools = d.Specs
	w.r = run.New(cfg)
	return nil
}

func (w *runner) loop() (Result, error) {
	info := workflow.GetInfo(w.ctx)
	w.startSize, w.startLength = info.GetCurrentHistorySize(), info.GetCurrentHistoryLength()
	for {
		if w.ctx.Err() != nil {
			return w.cancelled()
		}
		state := w.r.State()
		if state == run.StatePreparingRequest && w.shouldContinue() {
			return w.continueAsNew()
		}
		var (
			step run.Step
			err  error
		)
		if state == run.StateAwaitingModel {
			step, _ = w.r.ModelCall()
		} else if step, err = w.r.Next(); err != nil {
			return w.fail(err)
		}
		switch s := step.(type) {
		case run.CallModel:
			err = w.callModel(s)
		case run.ResolveToolCall:
			err = w.r.Resolve(w.resolve(s))
		case run.ApproveTools:
			err = w.awaitApproval(s)
		case run.CallTools:
			err = w.callTools(s)
		case run.Done:
			w.emit(Event{Kind: EventDone, Turn: w.r.Turn(), Text: s.Output, Usage: s.Usage})
			return w.result(s.Response), nil
		}
		if err != nil {
			if errors.Is(err, errCancelled) || w.ctx.Err() != nil {
				return w.cancelled()
			}
			return w.fail(err)
		}
	}
}

// fail ends the workflow with err as an application error whose type
// says what failed.
func (w *runner) fail(err error) (Result, error) {
	var ae *temporal.ApplicationError
	if w.r != nil && w.r.Err() != nil {
		err = w.r.Err()
	}
	var out error
	switch {
	case errors.As(err, &ae) && strings.HasPrefix(ae.Type(), "loom."):
		// A failure of ours, from an activity: pass it on with its details.
		out = rethrow(ae)
	case isRunFailure(err):
		f := encodeRunFailure(err)
		out = appError(err.Error(), ErrorTypeRunPrefix+f.Type, f)
	default:
		var ie *InputError
		if errors.As(err, &ie) {
			out = appError(ie.Error(), ErrorTypeInput, *ie)
		} else {
			out = appError(err.Error(), ErrorTypeInternal, nil)
		}
	}
	w.failure = out.Error()
	w.emit(Event{Kind: EventFailed, Error: w.failure})
	return Result{}, out
}

func isRunFailure(err error) bool {
	for _, target := range []error{run.ErrMaxTurns, run.ErrUnknownTool, run.ErrStopped, run.ErrTruncated, run.ErrConfig} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// rethrow makes a non-retryable copy of an activity's application error,
// keeping its type and details.
func rethrow(ae *temporal.ApplicationError) error {
	var details any
	t := ae.Type()
	switch {
	case strings.HasPrefix(t, ErrorTypeModelPrefix):
		var info modelErrorInfo
		if ae.HasDetails() && ae.Details(&info) == nil {
			details = info
		}
	case t == ErrorTypeTool:
		var info toolErrorInfo
		if ae.HasDetails() && ae.Details(&info) == nil {
			details = info
		}
	case t == ErrorTypeInput:
		var info InputError
		if ae.HasDetails() && ae.Details(&info) == nil {
			details = info
		}
	}
	return appError(ae.Message(), t, details)
}

// resolve decides about an invalid tool call the way the in-process agent
// does by default: see ResolveInvalid.
func (w *runner) resolve(s run.ResolveToolCall) run.Resolution {
	res := ResolveInvalid(s, w.r.Config().MaxInvalidRetries-w.invalidRetries)
	if _, ok := res.(run.Retry); ok {
		w.invalidRetries++
	}
	return res
}

// ResolveInvalid is how the workflow resolves an invalid tool call: Repair
// to the single closest allowed name when there is one, else Retry with
// UnknownToolFeedback while retriesLeft > 0, else Fail. It is the in-process
// agent's default policy, so that the same script gives the same run.
func ResolveInvalid(s run.ResolveToolCall, retriesLeft int) run.Resolution {
	if s.Suggestion != "" {
		return run.Repair{Name: s.Suggestion}
	}
	if retriesLeft > 0 {
		return run.Retry{Feedback: UnknownToolFeedback(s.Call.Name, s.Allowed)}
	}
	return run.Fail{}
}

// UnknownToolFeedback is the result ResolveInvalid gives the model for a
// call of a tool that does not exist.
func UnknownToolFeedback(name string, allowed []string) string {
	if len(allowed) == 0 {
		return fmt.Sprintf("There is no tool named %q, and no tool may be called now. Answer without tools.", name)
	}
	return fmt.Sprintf("There is no tool named %q. The available tools are: %s. Call one of them by its exact name, or answer without tools.", name, strings.Join(allowed, ", "))
}

// callModel runs the model activity for s and feeds the answer to the run.
func (w *runner) callModel(s run.CallModel) error {
	w.turnsThisRun++
	w.emit(Event{Kind: EventModelCall, Turn: s.Turn})
	retry := *w.opts.ModelRetry
	actx := workflow.WithActivityOptions(w.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: w.opts.ModelTimeout,
		HeartbeatTimeout:    w.opts.ModelHeartbeat,
		RetryPolicy:         &retry,
	})
	var out modelOutput
	for attempt := 0; ; attempt++ {
		tr, err := w.ts.delta(s.Request.Messages)
		if err != nil {
			return err
		}
		tools, err := w.ts.tools(s.Request.Tools)
		if err != nil {
			return err
		}
		req := s.Request
		req.Messages, req.Tools = nil, nil
		in := modelInput{Model: w.in.Model, Turn: s.Turn, Request: req, Tools: tools, Transcript: tr}
		err = workflow.ExecuteActivity(actx, ActivityModel, in).Get(w.ctx, &out)
		if err == nil {
			w.ts.advance(tr, out.AnswerKey)
			if tools != nil {
				w.ts.ToolsKey = tools.Key
			}
			break
		}
		if w.ctx.Err() != nil {
			return errCancelled
		}
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) && ae.Type() == ErrorTypeBlobsMissing && attempt == 0 {
			// The worker's store lacks what this workflow thought it
			// held (another machine, a restarted memory store): send the
			// whole transcript once.
			w.ts.reset()
			continue
		}
		return modelActivityError(err)
	}
	if err := w.r.ModelResponse(out.Response); err != nil {
		return err
	}
	w.verdicts = out.Approvals
	resp := out.Response
	w.emit(Event{Kind: EventModelAnswer, Turn: s.Turn, Text: resp.Text(), Calls: resp.ToolCalls(), Usage: resp.Usage})
	return nil
}

// modelActivityError turns the model activity's final failure into the
// error the run fails with: the model's own error when it gave one, a
// timeout as a model error of KindTimeout.
func modelActivityError(err error) error {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && strings.HasPrefix(ae.Type(), "loom.") {
		return ae
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		info := modelErrorInfo{Kind: "timeout", Op: "temporal: model activity", Message: "no answer within the activity's timeouts on any attempt: " + err.Error(), Retryable: true}
		return temporal.NewNonRetryableApplicationError(info.error().Error(), ErrorTypeModelPrefix+string(info.Kind), nil, info)
	}
	return fmt.Errorf("model activity: %w", err)
}

// callTools runs the calls of s: runs of consecutive read-only calls in
// parallel (at most Options.ParallelTools at once), every other call
// alone, in call order; results are fed in call order.
func (w *runner) callTools(s run.CallTools) error {
	n := len(s.Calls)
	results := make([]llm.ToolResult, n)
	have := make([]bool, n)
	for i, c := range s.Calls {
		if c.Result != nil {
			results[i], have[i] = *c.Result, true
		}
	}
	var err error
	for i := 0; i < n && err == nil; {
		if have[i] {
			i++
			continue
		}
		group := []int{i}
		j := i + 1
		if s.Calls[i].Spec.Effect == llm.EffectReadOnly {
			for ; j < n && (have[j] || s.Calls[j].Spec.Effect == llm.EffectReadOnly); j++ {
				if !have[j] {
					group = append(group, j)
				}
			}
		}
		err = w.runTools(s, group, results, have)
		i = j
	}
	if err != nil && !errors.Is(err, errCancelled) {
		return err
	}
	for i := range results {
		if !have[i] {
			results[i] = llm.ToolResult{CallID: s.Calls[i].Call.ID, Name: s.Calls[i].Call.Name, Content: NotRun, IsError: true}
		}
	}
	if ferr := w.r.ToolResults(results); ferr != nil {
		return ferr
	}
	return err
}

// runTools runs the calls at idx, at most ParallelTools at once, and fills
// their results. It stops starting calls once the run is cancelled or a
// tool failed, and waits for those it started.
func (w *runner) runTools(s run.CallTools, idx []int, results []llm.ToolResult, have []bool) error {
	retry := *w.opts.ToolRetry
	retry.NonRetryableErrorTypes = append(append([]string(nil), retry.NonRetryableErrorTypes...), ErrorTypeTool)
	actx := workflow.WithActivityOptions(w.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: w.opts.ToolTimeout,
		HeartbeatTimeout:    w.opts.ToolHeartbeat,
		RetryPolicy:         &retry,
		WaitForCancellation: true,
	})
	// Waiting goes on after a cancellation (the activities are told and
	// report back), so it uses a context that is not cancelled.
	wait, _ := workflow.NewDisconnectedContext(w.ctx)
	sel := workflow.NewSelector(wait)
	var (
		next, inflight int
		failed         error
	)
	start := func() {
		k := idx[next]
		next++
		c := s.Calls[k]
		in := toolInput{Call: c.Call, Effect: c.Spec.Effect, Turn: s.Turn, Key: fmt.Sprintf("%s/%d/%s", w.wfID, s.Turn, c.Call.ID)}
		w.emit(Event{Kind: EventToolCall, Turn: s.Turn, Call: &in.Call})
		w.running = append(w.running, c.Call)
		inflight++
		f := workflow.ExecuteActivity(actx, ActivityTool, in)
		sel.AddFuture(f, func(f workflow.Future) {
			inflight--
			w.notRunning(c.Call.ID)
			var out toolOutput
			err := f.Get(wait, &out)
			if err == nil && out.ContentKey != "" && contentKey(out.Result.Content) == out.ContentKey {
				w.ts.stored(out.ContentKey)
			}
			res, err := w.toolOutcome(c.Call, out.Result, err)
			if err != nil {
				if failed == nil {
					failed = err
				}
				return
			}
			results[k], have[k] = res, true
			w.emit(Event{Kind: EventToolResult, Turn: s.Turn, Call: &c.Call, Result: &res})
		})
	}
	for {
		for next < len(idx) && inflight < w.opts.ParallelTools && failed == nil && w.ctx.Err() == nil {
			start()
		}
		if inflight == 0 {
			break
		}
		sel.Select(wait)
	}
	if failed != nil {
		return failed
	}
	if w.ctx.Err() != nil {
		return errCancelled
	}
	return nil
}

func (w *runner) notRunning(id string) {
	for i, c := range w.running {
		if c.ID == id {
			w.running = append(w.running[:i:i], w.running[i+1:]...)
			return
		}
	}
}

// toolOutcome turns what a tool activity ended with into the call's
// result, or into the error that fails the run (a tool's own Go error).
func (w *runner) toolOutcome(call llm.ToolCall, res llm.ToolResult, err error) (llm.ToolResult, error) {
	if err == nil {
		res.CallID, res.Name = call.ID, call.Name
		return res, nil
	}
	fail := func(content string) (llm.ToolResult, error) {
		return llm.ToolResult{CallID: call.ID, Name: call.Name, Content: content, IsError: true}, nil
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == ErrorTypeTool {
		return llm.ToolResult{}, ae
	}
	var ce *temporal.CanceledError
	if errors.As(err, &ce) || w.ctx.Err() != nil {
		content := Interrupted
		var partial llm.ToolResult
		if ce != nil && ce.HasDetails() && ce.Details(&partial) == nil && partial.Content != "" {
			content += "\nWhat the tool reported: " + partial.Content
		}
		return fail(content)
	}
	return fail("Tool call failed: " + err.Error() + ". It may have partly run.")
}

// approvalWait is an approval the run waits for: the listed calls and the
// decisions received so far (nil until decided), in listed order.
type approvalWait struct {
	turn      int
	calls     []run.PendingCall
	decisions []*run.Decision
}

func (a *approvalWait) index(id string) int {
	for i, c := range a.calls {
		if c.Call.ID == id {
			return i
		}
	}
	return -1
}

func (a *approvalWait) complete() bool {
	for _, d := range a.decisions {
		if d != nil && d.Action == run.Aborted {
			return true
		}
	}
	for _, d := range a.decisions {
		if d == nil {
			return false
		}
	}
	return true
}

func (a *approvalWait) undecided() []run.PendingCall {
	var out []run.PendingCall
	for i, d := range a.decisions {
		if d == nil {
			out = append(out, a.calls[i])
		}
	}
	return out
}

func (a *approvalWait) received() []run.Decision {
	var out []run.Decision
	for _, d := range a.decisions {
		if d != nil {
			out = append(out, *d)
		}
	}
	return out
}

// awaitApproval waits for decisions on every call of s (they come through
// the UpdateApprove update), or for ApprovalTimeout, and feeds them.
func (w *runner) awaitApproval(s run.ApproveTools) error {
	a := &approvalWait{turn: s.Turn, calls: s.Calls, decisions: make([]*run.Decision, len(s.Calls))}
	if err := w.autoApprove(a); err != nil {
		return err
	}
	if a.complete() {
		return w.applyApproval(a)
	}
	w.approval = a
	w.emit(Event{Kind: EventApproval, Turn: s.Turn, Pending: a.undecided()})
	var err error
	timedOut := false
	if w.opts.ApprovalTimeout > 0 {
		var ok bool
		ok, err = workflow.AwaitWithTimeout(w.ctx, w.opts.ApprovalTimeout, a.complete)
		timedOut = err == nil && !ok
	} else {
		err = workflow.Await(w.ctx, a.complete)
	}
	if err != nil || w.ctx.Err() != nil {
		return errCancelled
	}
	if timedOut {
		reason := fmt.Sprintf("no decision arrived within %s", w.opts.ApprovalTimeout)
		for i, d := range a.decisions {
			if d == nil {
				a.decisions[i] = &run.Decision{CallID: a.calls[i].Call.ID, Action: run.Denied, Reason: reason}
				w.emit(Event{Kind: EventDecision, Turn: s.Turn, Decision: a.decisions[i]})
			}
		}
	}
	return w.applyApproval(a)
}

// autoApprove approves the calls of a whose tools say their arguments
// need no decision, as the in-process agent does: the verdicts came with
// the model's answer, or are asked of a worker (the tools live there).
// These approvals are not events: nobody decided.
func (w *runner) autoApprove(a *approvalWait) error {
	var ask []llm.ToolCall
	var at []int
	for i, c := range a.calls {
		if !slices.Contains(w.byArgs, c.Call.Name) {
			continue
		}
		if v, ok := w.verdict(c.Call); ok {
			if !v {
				a.decisions[i] = &run.Decision{CallID: c.Call.ID, Action: run.Approved}
			}
			continue
		}
		ask = append(ask, c.Call)
		at = append(at, i)
	}
	if len(ask) == 0 {
		return nil
	}
	actx := workflow.WithActivityOptions(w.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5},
	})
	var needs []bool
	if err := workflow.ExecuteActivity(actx, ActivityApproval, ask).Get(w.ctx, &needs); err != nil {
		if w.ctx.Err() != nil {
			return errCancelled
		}
		return err
	}
	for j, i := range at {
		if j < len(needs) && !needs[j] {
			a.decisions[i] = &run.Decision{CallID: a.calls[i].Call.ID, Action: run.Approved}
		}
	}
	return nil
}

// verdict returns what the model activity's worker said about call: found
// when the call is the one the model made (same id, name and arguments);
// a repaired call is asked about again.
func (w *runner) verdict(call llm.ToolCall) (needs, ok bool) {
	for _, v := range w.verdicts {
		c := v.Call
		if (c.ID == call.ID || c.ID != "" && c.ID == call.ProviderID) && c.Name == call.Name && c.Arguments == call.Arguments {
			return v.Needs, true
		}
	}
	return false, false
}

func (w *runner) applyApproval(a *approvalWait) error {
	ds := a.received()
	w.approval = nil
	for _, d := range ds {
		w.decided = append(w.decided, d.CallID)
	}
	return w.r.Approve(ds)
}

// cancelled closes every open call of the run (denied approvals, not-run
// or interrupted results: nothing runs any more) and ends the workflow
// cancelled, with the run's messages so far as the details.
func (w *runner) cancelled() (Result, error) {
	if w.r == nil {
		w.emit(Event{Kind: EventCancelled})
		return Result{}, temporal.NewCanceledError(Result{})
	}
	for range 8 {
		st := w.r.State()
		if st != run.StateResolvingToolCalls && st != run.StateAwaitingApproval && st != run.StateAwaitingAdvance && st != run.StateExecutingTools {
			break
		}
		step, err := w.r.Next()
		if err != nil {
			break
		}
		switch s := step.(type) {
		case run.ResolveToolCall:
			err = w.r.Resolve(run.Skip{Reason: NotRun})
		case run.ApproveTools:
			a := w.approval
			if a == nil || a.turn != s.Turn {
				a = &approvalWait{turn: s.Turn, calls: s.Calls, decisions: make([]*run.Decision, len(s.Calls))}
			}
			for i, d := range a.decisions {
				if d == nil {
					a.decisions[i] = &run.Decision{CallID: a.calls[i].Call.ID, Action: run.Denied, Reason: "the run was cancelled before a decision"}
				}
			}
			err = w.applyApproval(a)
		case run.CallTools:
			results := make([]llm.ToolResult, len(s.Calls))
			for i, c := range s.Calls {
				if c.Result != nil {
					results[i] = *c.Result
				} else {
					results[i] = llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Content: NotRun, IsError: true}
				}
			}
			err = w.r.ToolResults(results)
		}
		if err != nil {
			break
		}
	}
	resp, ok := w.r.Response()
	if !ok {
		resp = run.Response{Messages: w.r.Messages(), Usage: w.r.Usage(), Calls: w.r.Calls()}
	}
	w.emit(Event{Kind: EventCancelled, Turn: w.r.Turn(), Usage: w.r.Usage()})
	return Result{}, temporal.NewCanceledError(w.result(resp))
}

// shouldContinue reports whether the workflow should continue as new
// before the next model call: the history passed a bound (or the server
// suggests it), and it grew since this run started by at least what the
// run started with. The second condition keeps the carried state (a run
// starts with its transcript in its history) from being carried again
// turn after turn: each byte of history is carried at most once more, so
// the history over all runs stays linear in the run's length.
func (w *runner) shouldContinue() bool {
	if w.turnsThisRun == 0 {
		return false
	}
	o := w.opts
	if o.TurnsPerRun > 0 && w.turnsThisRun >= o.TurnsPerRun {
		return true
	}
	info := workflow.GetInfo(w.ctx)
	size, length := info.GetCurrentHistorySize(), info.GetCurrentHistoryLength()
	grown := size-w.startSize >= w.startSize && length-w.startLength >= w.startLength
	if size >= hardHistoryBytes || length >= hardHistoryEvents {
		return true // close to the server's limits: continue whatever it costs
	}
	return grown && (info.GetContinueAsNewSuggested() ||
		o.HistoryBytes > 0 && size >= o.HistoryBytes ||
		o.HistoryEvents > 0 && length >= o.HistoryEvents)
}

// Bounds past which the workflow continues as new regardless: well below
// the server's hard limits of 50 MiB and 51,200 events.
const (
	hardHistoryBytes  = 32 << 20
	hardHistoryEvents = 32_000
)

// Result is the workflow's result: the run's response, without its
// messages when they would make the result too large for one payload
// (over Options.ResultBytes); Handle.Result then fetches them with the
// QueryMessages query.
type Result struct {
	Response run.Response
	// Omitted is how many messages were left out of Response.Messages.
	Omitted int
}

// resultJSON is Result on the wire. The final message is left out when it
// is the zero Message (a run whose last turn was empty, or one cancelled
// before its end), which llm.Message cannot decode.
type resultJSON struct {
	Output   string           `json:"output"`
	Message  *llm.Message     `json:"message,omitempty"`
	Messages []llm.Message    `json:"messages"`
	Usage    llm.Usage        `json:"usage,omitzero"`
	Calls    []run.CallRecord `json:"calls"`
	Omitted  int              `json:"omitted,omitempty"`
}

// MarshalJSON encodes r.
func (r Result) MarshalJSON() ([]byte, error) {
	j := resultJSON{Output: r.Response.Output, Messages: r.Response.Messages, Usage: r.Response.Usage, Calls: r.Response.Calls, Omitted: r.Omitted}
	if m := r.Response.Message; m.Role != "" || len(m.Parts) > 0 {
		j.Message = &m
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encoded.
func (r *Result) UnmarshalJSON(data []byte) error {
	var j resultJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*r = Result{Response: run.Response{Output: j.Output, Messages: j.Messages, Usage: j.Usage, Calls: j.Calls}, Omitted: j.Omitted}
	if j.Message != nil {
		r.Response.Message = *j.Message
	}
	return nil
}

func (w *runner) result(resp run.Response) Result {
	size := 0
	for _, m := range resp.Messages {
		for _, p := range m.Parts {
			size += partSize(p)
		}
	}
	if size <= w.opts.ResultBytes {
		return Result{Response: resp}
	}
	n := len(resp.Messages)
	resp.Messages = nil
	return Result{Response: resp, Omitted: n}
}

// partSize estimates the encoded size of a part from its content.
func partSize(p llm.Part) int {
	const overhead = 64
	switch p := p.(type) {
	case llm.Text:
		return overhead + len(p.Text)
	case llm.Thinking:
		return overhead + len(p.Text) + len(p.Signature) + len(p.Redacted)
	case llm.ToolCall:
		return overhead + len(p.ID) + len(p.Name) + len(p.Arguments) + len(p.ProviderID)
	case llm.ToolResult:
		n := overhead + len(p.CallID) + len(p.Name) + len(p.Content)
		for _, img := range p.Images {
			n += partSize(img)
		}
		return n
	case llm.Image:
		return overhead + len(p.URL) + len(p.MediaType) + len(p.Data)*4/3
	}
	return overhead
}

// MessagePage is the answer of the QueryMessages query.
type MessagePage struct {
	Messages []llm.Message `json:"messages"`
	// Next is the index to ask for next; Total the number of messages.
	Next  int `json:"next"`
	Total int `json:"total"`
}

// messages returns the run's messages from index from, about a megabyte
// at most (always at least one).
func (w *runner) messages(from int) MessagePage {
	if w.r == nil {
		return MessagePage{}
	}
	msgs := w.r.Messages()
	p := MessagePage{Total: len(msgs), Next: max(from, 0)}
	size := 0
	for p.Next < len(msgs) {
		n := 0
		for _, part := range msgs[p.Next].Parts {
			n += partSize(part)
		}
		if len(p.Messages) > 0 && size+n > loadPageBytes {
			break
		}
		size += n
		p.Messages = append(p.Messages, msgs[p.Next])
		p.Next++
	}
	return p
}
