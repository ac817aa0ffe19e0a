package run

import (
	"fmt"
	"strings"

	"github.com/loomkit/loom/llm"
)

// approveStep lists the calls awaiting a decision.
func (r *Run) approveStep() ApproveTools {
	t := r.mt
	calls := make([]PendingCall, len(t.approvals))
	for i, at := range t.approvals {
		c := t.call(at)
		calls[i] = PendingCall{Call: c, Spec: r.spec(c.Name)}
	}
	return ApproveTools{Turn: r.turn, Calls: calls}
}

// approve checks the decisions against the listed calls, then applies them.
func (r *Run) approve(ds []Decision) (state, error) {
	t := r.mt
	bad := func(format string, args ...any) (state, error) {
		return 0, r.protocolError(stateApproving, inApprove, fmt.Sprintf(format, args...))
	}
	decided := make([]int, len(t.approvals)) // decision index+1 per listed call
	abort := -1
	for i, d := range ds {
		at := -1
		for j, call := range t.approvals {
			if t.call(call).ID == d.CallID {
				at = j
				break
			}
		}
		if at < 0 {
			return bad("decision %d is for call %q, which is not awaiting approval (awaiting: %s)", i, d.CallID, r.awaitingIDs())
		}
		if decided[at] != 0 {
			return bad("call %q has two decisions (%d and %d); give exactly one per call", d.CallID, decided[at]-1, i)
		}
		decided[at] = i + 1
		switch d.Action {
		case Approved, Denied:
		case Edited:
			if err := (llm.ToolCall{Arguments: d.Arguments}).ArgumentsError(); err != nil {
				return bad("the edited arguments of call %q are not one JSON object: %v", d.CallID, err)
			}
		case Aborted:
			if abort < 0 {
				abort = i
			}
		default:
			return bad("decision %d has action %q; want %q, %q, %q or %q", i, d.Action, Approved, Edited, Denied, Aborted)
		}
	}
	if abort >= 0 {
		reason := ds[abort].Reason
		if reason == "" {
			reason = fmt.Sprintf("the approval of call %q was aborted", ds[abort].CallID)
		}
		return 0, &StoppedError{Reason: reason}
	}
	for j, at := range t.approvals {
		if decided[j] == 0 {
			return bad("call %q has no decision (awaiting: %s); give one decision per listed call", t.call(at).ID, r.awaitingIDs())
		}
	}
	for j, at := range t.approvals {
		d := ds[decided[j]-1]
		c := t.call(at)
		switch d.Action {
		case Edited:
			c.Arguments, c.Malformed = d.Arguments, false
			t.setCall(at, c)
		case Denied:
			t.pre[at] = &llm.ToolResult{CallID: c.ID, Name: c.Name, Content: DeniedPrefix + d.Reason, IsError: true}
		}
	}
	t.approvals = nil
	return stateAdvance, nil
}

func (r *Run) awaitingIDs() string {
	t := r.mt
	ids := make([]string, len(t.approvals))
	for i, at := range t.approvals {
		ids[i] = fmt.Sprintf("%q", t.call(at).ID)
	}
	return "[" + strings.Join(ids, ", ") + "]"
}
