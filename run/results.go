package run

import (
	"fmt"
	"strings"

	"github.com/loomkit/loom/llm"
)

// commitResults checks results against the pending calls, as a multiset of
// ids, and commits them in call order as one user message.
func (r *Run) commitResults(results []llm.ToolResult, notes []string) (state, error) {
	pend := r.pending
	if len(results) == 0 {
		return 0, &StoppedError{Reason: fmt.Sprintf("the driver fed no tool results for %d pending call(s); every call needs one (use PendingCall.Result, or an error result)", len(pend))}
	}
	bad := func(format string, args ...any) (state, error) {
		return 0, r.protocolError(stateExecuting, inToolResults, fmt.Sprintf(format, args...))
	}
	// order[i] is the index in results of the answer to call i, plus one.
	order := make([]int, len(pend))
	var byID map[string][]int // for big batches: call indexes per id
	if len(pend) > 16 {
		byID = make(map[string][]int, len(pend))
		for i, p := range pend {
			byID[p.Call.ID] = append(byID[p.Call.ID], i)
		}
	}
	for j, res := range results {
		found, answered := -1, false
		match := func(i int) bool {
			if order[i] == 0 {
				found = i
				return true
			}
			answered = true
			return false
		}
		if byID != nil {
			for _, i := range byID[res.CallID] {
				if match(i) {
					break
				}
			}
		} else {
			for i := range pend {
				if pend[i].Call.ID == res.CallID && match(i) {
					break
				}
			}
		}
		if found < 0 {
			if answered {
				return bad("result %d answers call %q, which an earlier result already answered", j, res.CallID)
			}
			return bad("result %d answers call %q, which is not pending (pending: %s)", j, res.CallID, pendingIDs(pend))
		}
		order[found] = j + 1
	}
	var missing []string
	for i := range pend {
		if order[i] == 0 {
			missing = append(missing, fmt.Sprintf("%q", pend[i].Call.ID))
		}
	}
	if len(missing) > 0 {
		return bad("calls [%s] have no result; answer every pending call exactly once", strings.Join(missing, ", "))
	}
	for i, p := range pend {
		res := results[order[i]-1]
		if p.Result != nil && (res.Content != p.Result.Content || res.IsError != p.Result.IsError) {
			return bad("the result for call %q differs from its preresolved result; return PendingCall.Result verbatim and do not run the tool", p.Call.ID)
		}
	}

	parts := make([]llm.Part, 0, len(pend)+len(notes))
	for i, p := range pend {
		res := results[order[i]-1]
		if p.Result != nil {
			res = *p.Result
		}
		res.Name = p.Call.Name
		parts = append(parts, res)
	}
	for _, n := range notes {
		if n != "" {
			parts = append(parts, llm.Text{Text: n})
		}
	}
	r.hist = append(r.hist, llm.Message{Role: llm.RoleUser, Parts: parts})
	r.pending = nil
	return statePreparing, nil
}

func pendingIDs(pend []PendingCall) string {
	ids := make([]string, len(pend))
	for i, p := range pend {
		ids[i] = fmt.Sprintf("%q", p.Call.ID)
	}
	return "[" + strings.Join(ids, ", ") + "]"
}
