package temporal

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/loomkit/loom/run"
)

// ParseDecision reads a decision as `loom approve RUN_ID DECISION...`
// takes it:
//
//	CALL_ID                  approve the call
//	CALL_ID=approve
//	CALL_ID=deny[:REASON]    deny it (the model reads the reason)
//	CALL_ID=abort[:REASON]   stop the run
//	CALL_ID=edit:{...}       run it with these arguments (a JSON object)
//
// It returns an *InputError for anything else.
func ParseDecision(s string) (run.Decision, error) {
	id, rest, hasAction := strings.Cut(s, "=")
	if id == "" {
		return run.Decision{}, &InputError{Field: "decision", Reason: fmt.Sprintf("%q names no call; write CALL_ID, CALL_ID=approve, CALL_ID=deny:REASON, CALL_ID=abort:REASON or CALL_ID=edit:{JSON}", s)}
	}
	if !hasAction {
		return run.Decision{CallID: id, Action: run.Approved}, nil
	}
	action, arg, _ := strings.Cut(rest, ":")
	switch action {
	case "approve", "approved":
		if arg != "" {
			break
		}
		return run.Decision{CallID: id, Action: run.Approved}, nil
	case "deny", "denied":
		return run.Decision{CallID: id, Action: run.Denied, Reason: arg}, nil
	case "abort", "aborted":
		return run.Decision{CallID: id, Action: run.Aborted, Reason: arg}, nil
	case "edit", "edited":
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(arg), &obj); err != nil || obj == nil {
			return run.Decision{}, &InputError{Field: "decision", Reason: fmt.Sprintf("%q: the edited arguments are not one JSON object", s)}
		}
		return run.Decision{CallID: id, Action: run.Edited, Arguments: arg}, nil
	}
	return run.Decision{}, &InputError{Field: "decision", Reason: fmt.Sprintf("%q: unknown action %q; use approve, deny:REASON, abort:REASON or edit:{JSON}", s, rest)}
}
