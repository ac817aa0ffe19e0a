package temporal

import (
	"encoding/json"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/loomkit/loom/run"
)

// ApprovalResult is what an accepted UpdateApprove returns.
type ApprovalResult struct {
	// Waiting lists the ids of the calls of the same approval still
	// without a decision; empty when the run goes on.
	Waiting []string `json:"waiting,omitempty"`
}

// handlers registers the query and update handlers. They only read the
// runner's state, except the update's handler, which records decisions.
func (w *runner) handlers() error {
	if err := workflow.SetQueryHandler(w.ctx, QueryStatus, func() (Status, error) {
		return w.status(), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(w.ctx, QueryEvents, func(after int64) (EventPage, error) {
		return w.events.page(after), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(w.ctx, QueryMessages, func(from int) (MessagePage, error) {
		return w.messages(from), nil
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(w.ctx, UpdateApprove, w.approve, workflow.UpdateHandlerOptions{
		Validator: w.validateApproval,
	})
}

func (w *runner) status() Status {
	s := Status{State: "Starting", Runs: w.runs, LastEvent: w.events.next - 1, Error: w.failure}
	if s.LastEvent < 0 {
		s.LastEvent = 0
	}
	if w.r != nil {
		s.State, s.Turn, s.Usage = w.r.State(), w.r.Turn(), w.r.Usage()
	}
	if a := w.approval; a != nil {
		s.Approvals, s.Decided = a.undecided(), a.received()
	}
	s.Running = slices.Clone(w.running)
	return s
}

func rejected(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrorTypeRejected, nil)
}

// validateApproval accepts decisions only for calls of the pending
// approval that have none yet, each at most once, with a known action and,
// for an edit, arguments that are one JSON object. A rejected update
// changes nothing and is not written to the workflow's history.
func (w *runner) validateApproval(ds []run.Decision) error {
	a := w.approval
	if len(ds) == 0 {
		return rejected("no decisions given")
	}
	for i, d := range ds {
		for _, e := range ds[:i] {
			if e.CallID == d.CallID {
				return rejected("call %q has two decisions in one update", d.CallID)
			}
		}
		k := -1
		if a != nil {
			k = a.index(d.CallID)
		}
		switch {
		case k < 0 && slices.Contains(w.decided, d.CallID):
			return rejected("call %q was decided already; the decision is stale", d.CallID)
		case k < 0 && a == nil:
			return rejected("no approval is pending (the run is %s); call %q is unknown", w.status().State, d.CallID)
		case k < 0:
			return rejected("call %q does not wait for approval; waiting: %v", d.CallID, ids(a.undecided()))
		case a.decisions[k] != nil:
			return rejected("call %q was decided already (%s); the decision is a duplicate", d.CallID, a.decisions[k].Action)
		}
		switch d.Action {
		case run.Approved, run.Denied, run.Aborted:
		case run.Edited:
			if d.Arguments != "" {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal([]byte(d.Arguments), &obj); err != nil || obj == nil {
					return rejected("call %q: the edited arguments are not one JSON object", d.CallID)
				}
			}
		default:
			return rejected("call %q: unknown action %q; use approved, edited, denied or aborted", d.CallID, d.Action)
		}
	}
	return nil
}

// approve records decisions accepted by validateApproval; the loop feeds
// them to the run once every call has one (or one aborts).
func (w *runner) approve(_ workflow.Context, ds []run.Decision) (ApprovalResult, error) {
	if err := w.validateApproval(ds); err != nil {
		return ApprovalResult{}, err
	}
	a := w.approval
	for _, d := range ds {
		d := d
		a.decisions[a.index(d.CallID)] = &d
		w.emit(Event{Kind: EventDecision, Turn: a.turn, Decision: &d})
	}
	if a.complete() {
		return ApprovalResult{}, nil
	}
	return ApprovalResult{Waiting: ids(a.undecided())}, nil
}

func ids(calls []run.PendingCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Call.ID
	}
	return out
}
