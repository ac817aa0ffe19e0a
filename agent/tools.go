package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/tool"
)

// Texts the model reads in results the driver writes itself.
const (
	// Interrupted answers a call that was running when the run was
	// cancelled.
	Interrupted = "Tool call interrupted: the run was cancelled while the tool was running. It may or may not have taken effect; check before doing it again."
	// NotStarted answers a call that had not started when the run was
	// cancelled.
	NotStarted = "Tool call not run: the run was cancelled before it started."
	// InterruptedMaybe answers, on resume, a call of a tool that is not
	// safe to repeat, which had started when the process driving the run
	// stopped and never reported back.
	InterruptedMaybe = "Tool call interrupted: the process running it stopped before the tool reported back. It may or may not have taken effect; check before doing it again."
	// SkippedPrefix starts the result of a call a tool middleware skipped;
	// the reason follows.
	SkippedPrefix = "Tool call skipped: "
	// ToolBudgetSpent answers calls beyond Budget.MaxToolCalls.
	ToolBudgetSpent = "Tool call not run: the run's tool-call budget is spent. Give your final answer with what you have."
)

type callStatus uint8

const (
	notStarted callStatus = iota
	finished
	interrupted
)

// outcome is what became of one call of a batch.
type outcome struct {
	res      llm.ToolResult
	status   callStatus
	executed bool  // the tool was started (counts for budgets and guards)
	skipped  bool  // a middleware skipped it
	stop     error // the call stops the run
}

type keyCtx struct{}

// IdempotencyKey returns the idempotency key of the tool call that ctx
// belongs to: the same for every execution of one call, also after a
// crash and resume, and different for every other call ("<run id>/<turn>/
// <call id>"). A tool that calls an API accepting idempotency keys passes
// it on, so that a call repeated on resume takes effect once. It returns
// "" outside a tool call.
func IdempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(keyCtx{}).(string)
	return k
}

func idempotencyKey(runID string, turn int, callID string) string {
	return runID + "/" + strconv.Itoa(turn) + "/" + callID
}

// callTools runs the calls of a CallTools step and commits their results
// in call order, all together, once every call settled.
func (x *runner) callTools(ctx context.Context, s run.CallTools) error {
	calls := s.Calls
	outs := make([]outcome, len(calls))
	for i, c := range calls {
		if c.Result != nil {
			outs[i] = outcome{res: *c.Result, status: finished}
		}
	}
	if err := x.prefill(ctx, s.Turn, calls, outs); err != nil {
		return err
	}
	x.limitToolCalls(calls, outs)
	for _, c := range calls {
		x.emit(ToolCall{Turn: s.Turn, Call: c.Call, Preresolved: c.Result != nil})
	}
	x.execBatch(ctx, s.Turn, calls, outs)
	if ctx.Err() != nil {
		return x.interruptBatch(ctx, s.Turn, calls, outs)
	}
	for i := range outs {
		if outs[i].stop != nil {
			return outs[i].stop // the lowest-index stopper; nothing is committed
		}
	}
	return x.commit(ctx, s.Turn, calls, outs, false)
}

// limitToolCalls answers the calls beyond the tool-call budget without
// running them.
func (x *runner) limitToolCalls(calls []run.PendingCall, outs []outcome) {
	max := x.a.cfg.Budget.MaxToolCalls
	if max <= 0 {
		return
	}
	left := max - x.led.ToolCalls
	for i := range outs {
		if outs[i].executed {
			left--
		}
	}
	for i, c := range calls {
		if outs[i].status != notStarted {
			continue
		}
		if left > 0 {
			left--
			continue
		}
		outs[i] = outcome{res: closedResult(c.Call, ToolBudgetSpent), status: finished}
	}
}

func closedResult(c llm.ToolCall, text string) llm.ToolResult {
	return llm.ToolResult{CallID: c.ID, Name: c.Name, Content: text, IsError: true}
}

// execBatch runs the calls not settled yet within the concurrency bound.
// A call that stops the run keeps later calls from starting; calls
// already running finish.
func (x *runner) execBatch(ctx context.Context, turn int, calls []run.PendingCall, outs []outcome) {
	var todo []int
	for i := range outs {
		if outs[i].status == notStarted {
			todo = append(todo, i)
		}
	}
	var halt atomic.Bool
	exec := func(i int) {
		outs[i] = x.execOne(ctx, turn, calls[i])
		if outs[i].stop != nil {
			halt.Store(true)
		}
	}
	stopped := func() bool { return halt.Load() || ctx.Err() != nil }
	limit := x.a.cfg.ToolConcurrency
	if len(todo) <= 1 || limit == 1 {
		for _, i := range todo {
			if stopped() {
				return
			}
			exec(i)
		}
		return
	}
	parallel := limit
	if parallel == 0 {
		parallel = DefaultReadOnlyParallel
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, i := range todo {
		alone := limit == 0 && calls[i].Spec.Effect != llm.EffectReadOnly
		if alone {
			wg.Wait() // after every call before it
		}
		if stopped() {
			return
		}
		if alone {
			exec(i) // and before every call after it
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if stopped() {
			<-sem
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			exec(i)
		}()
	}
}

// execOne runs one call: intent recorded, tool run with the idempotency
// key in its context, result recorded.
func (x *runner) execOne(ctx context.Context, turn int, pc run.PendingCall) outcome {
	c := pc.Call
	t, ok := x.a.tools[c.Name]
	if !ok { // the machine lets no unknown tool through; be safe anyway
		return outcome{res: closedResult(c, fmt.Sprintf("There is no tool named %q.", c.Name)), status: finished}
	}
	key := idempotencyKey(x.id, turn, c.ID)
	if err := x.j.intent(ctx, x, turn, c, key); err != nil {
		return outcome{stop: err}
	}
	res, err := t.Call(context.WithValue(ctx, keyCtx{}, key), c.Args())
	res.CallID, res.Name = c.ID, c.Name
	out := outcome{res: res, status: finished, executed: true}
	if ctx.Err() != nil {
		out.status = interrupted
		return out
	}
	var skip *SkipError
	var stop *StopError
	switch {
	case err == nil:
		out.res = tool.DropRefusedImages(out.res)
	case errors.As(err, &skip):
		out.res = closedResult(c, SkippedPrefix+skip.Reason)
		out.skipped, out.executed = true, false
	case errors.As(err, &stop):
		out.stop = stop
		return out
	default:
		out.stop = &ToolError{Tool: c.Name, CallID: c.ID, Err: err}
		return out
	}
	if err := x.j.result(ctx, x, turn, out.res); err != nil {
		out.stop = err
	}
	return out
}

// interruptBatch closes every open call of a batch cut short by the
// run's cancellation with an explicit result, and commits the batch so
// that the history stays valid for a resumption.
func (x *runner) interruptBatch(ctx context.Context, turn int, calls []run.PendingCall, outs []outcome) error {
	wctx := context.WithoutCancel(ctx)
	for i, c := range calls {
		o := &outs[i]
		switch {
		case o.status == finished && o.stop == nil:
			continue
		case o.status == notStarted && !o.executed && o.stop == nil:
			o.res = closedResult(c.Call, NotStarted)
		default:
			o.res = closedResult(c.Call, Interrupted)
		}
		o.status, o.stop = finished, nil
		if err := x.j.result(wctx, x, turn, o.res); err != nil {
			return err
		}
	}
	if err := x.commit(wctx, turn, calls, outs, true); err != nil {
		return err
	}
	return ctx.Err()
}

// commit feeds the batch's results to the machine with the notes the
// guards and budgets add, and updates the ledger.
func (x *runner) commit(ctx context.Context, turn int, calls []run.PendingCall, outs []outcome, cut bool) error {
	results := make([]llm.ToolResult, len(calls))
	allFailed := len(outs) > 0
	var errs []string
	for i := range outs {
		results[i] = outs[i].res
		if !outs[i].res.IsError {
			allFailed = false
		} else if len(errs) < 3 {
			errs = append(errs, firstLine(outs[i].res.Content))
		}
	}
	led := x.led.clone()
	var notes []Note
	k := x.a.cfg.LoopGuard.repeats()
	for i, o := range outs {
		if !o.executed {
			continue
		}
		led.ToolCalls++
		if k <= 0 {
			continue
		}
		if led.Repeats == nil {
			led.Repeats = make(map[string]int)
		}
		key := repeatKey(calls[i].Call)
		led.Repeats[key]++
		if led.Repeats[key] == k && !cut {
			notes = append(notes, Note{Turn: turn, Reason: "loop", Text: loopNote(calls[i].Call.Name, k)})
		}
	}
	if allFailed {
		led.FailedRounds++
	} else {
		led.FailedRounds = 0
	}
	now := x.a.now()
	led.Elapsed = x.led.Elapsed + now.Sub(x.start)
	if b := &x.a.cfg.Budget; !cut && b.soft() > 0 {
		sp := x.spent()
		sp.toolCalls = led.ToolCalls
		sp.elapsed = led.Elapsed
		for _, l := range b.states(sp) {
			if l.used >= b.soft()*l.max && l.used < l.max && !slices.Contains(led.Warned, l.name) {
				led.Warned = append(led.Warned, l.name)
				notes = append(notes, Note{Turn: turn, Reason: "budget", Text: softNote(l)})
			}
		}
	}
	texts := make([]string, len(notes))
	for i, n := range notes {
		texts[i] = n.Text
	}
	if err := x.r.ToolResults(results, texts...); err != nil {
		return err
	}
	x.led, x.start = led, now
	if x.j != nil {
		if err := x.j.note(ctx, x, noteRecord{Type: noteCommit, Turn: turn, Notes: texts, Ledger: ledgerPtr(led)}); err != nil {
			return err
		}
	}
	for i, c := range calls {
		x.emit(ToolResult{Turn: turn, Call: c.Call, Result: results[i], Skipped: outs[i].skipped})
	}
	for _, n := range notes {
		x.emit(n)
	}
	if limit := orDefault(x.a.cfg.MaxFailedRounds, DefaultMaxFailedRounds); !cut && limit > 0 && led.FailedRounds >= limit {
		return &ToolFailuresError{Rounds: led.FailedRounds, Last: errs}
	}
	return nil
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' || i >= 200 {
			return s[:i]
		}
	}
	return s
}

func loopNote(name string, k int) string {
	return fmt.Sprintf("Note: you have called %s with the same arguments %d times; calling it again will give the same result. Change your approach, or give your final answer with what you have.", name, k)
}

// repeatKey identifies a call by its tool and its arguments, whatever the
// order of their members.
func repeatKey(c llm.ToolCall) string {
	args := []byte(c.Args())
	var v any
	if json.Unmarshal(args, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			args = b
		}
	}
	h := sha256.New()
	h.Write([]byte(c.Name))
	h.Write([]byte{0})
	h.Write(args)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// approve decides about the calls that need approval: calls whose tool
// says their arguments need none are approved on the spot; the others go
// to the Approver (or come from Resumption.Decisions).
func (x *runner) approve(ctx context.Context, s run.ApproveTools) error {
	var auto []run.Decision
	var ask []run.PendingCall
	for _, c := range s.Calls {
		if t, ok := x.a.orig[c.Call.Name]; ok && !tool.NeedsApproval(t, c.Call.Args()) {
			auto = append(auto, run.Decision{CallID: c.Call.ID, Action: run.Approved})
			continue
		}
		ask = append(ask, c)
	}
	var decided []run.Decision
	if len(ask) > 0 {
		var rest []run.PendingCall
		if x.decisions != nil {
			given := x.decisions
			x.decisions = nil
			for _, c := range ask {
				if d, ok := findDecision(given, c.Call.ID); ok {
					decided = append(decided, d)
				} else {
					rest = append(rest, c)
				}
			}
			if len(decided) != len(given) {
				return &ResumeError{RunID: x.id, Reason: fmt.Sprintf("%d of the %d decisions are for calls that do not wait for approval (waiting: %s)", len(given)-len(decided), len(given), callIDs(ask))}
			}
		} else {
			rest = ask
		}
		if len(rest) > 0 {
			if err := x.j.approvalRequested(ctx, x, s.Turn, rest); err != nil {
				return err
			}
			x.emit(ApprovalRequested{Turn: s.Turn, Calls: rest})
			ds, err := x.a.approver.Approve(ctx, ApprovalRequest{RunID: x.id, Turn: s.Turn, Calls: rest})
			if err != nil {
				if errors.Is(err, ErrSuspend) {
					return x.suspend(s.Turn, rest)
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return &ApprovalError{Reason: "the approver failed", Err: err}
			}
			if err := checkDecisions(rest, ds); err != nil {
				return err
			}
			decided = append(decided, ds...)
		}
	}
	all := append(auto, decided...)
	if err := x.r.Approve(all); err != nil {
		return &ApprovalError{Reason: "the decisions were refused", Err: err}
	}
	if len(decided) == 0 {
		// Nothing was asked: the decisions follow from the arguments, and
		// a replay makes them again (autoApprove), so they are not
		// journaled or reported.
		return nil
	}
	if err := x.j.approvalDecided(ctx, x, s.Turn, all); err != nil {
		return err
	}
	for _, c := range s.Calls {
		if d, ok := findDecision(decided, c.Call.ID); ok {
			x.emit(ApprovalDecided{Turn: s.Turn, Call: c.Call, Decision: d})
		}
	}
	return nil
}

// autoApprove approves the calls of an ApproveTools step when none of
// them needs a decision by its arguments, and reports whether it did.
func (x *runner) autoApprove(s run.ApproveTools) (bool, error) {
	ds := make([]run.Decision, len(s.Calls))
	for i, c := range s.Calls {
		t, ok := x.a.orig[c.Call.Name]
		if !ok || tool.NeedsApproval(t, c.Call.Args()) {
			return false, nil
		}
		ds[i] = run.Decision{CallID: c.Call.ID, Action: run.Approved}
	}
	return true, x.r.Approve(ds)
}

func findDecision(ds []run.Decision, id string) (run.Decision, bool) {
	for _, d := range ds {
		if d.CallID == id {
			return d, true
		}
	}
	return run.Decision{}, false
}

func callIDs(calls []run.PendingCall) string {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = fmt.Sprintf("%q", c.Call.ID)
	}
	return fmt.Sprint(ids)
}

// checkDecisions makes sure an Approver answered each call exactly once.
func checkDecisions(calls []run.PendingCall, ds []run.Decision) error {
	if len(ds) != len(calls) {
		return &ApprovalError{Reason: fmt.Sprintf("the approver gave %d decisions for %d calls %s; give exactly one per call", len(ds), len(calls), callIDs(calls))}
	}
	for _, c := range calls {
		n := 0
		for _, d := range ds {
			if d.CallID == c.Call.ID {
				n++
			}
		}
		if n != 1 {
			return &ApprovalError{Reason: fmt.Sprintf("the approver gave %d decisions for call %q; give exactly one per call", n, c.Call.ID)}
		}
	}
	return nil
}

// suspend ends the drive with the run waiting for decisions.
func (x *runner) suspend(turn int, calls []run.PendingCall) error {
	return &SuspendedError{RunID: x.id, Turn: turn, Calls: calls, Snapshot: x.snapshot()}
}
