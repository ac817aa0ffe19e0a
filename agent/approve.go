package agent

import (
	"context"
	"fmt"
	"path"
	"regexp"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
)

// Approver decides about tool calls that need approval before they run.
//
// Approve gets the calls of one model turn that need a decision and
// returns exactly one run.Decision per call: run.Approved, run.Edited
// (with the arguments to run instead), run.Denied (with a reason the
// model reads) or run.Aborted (which stops the run). It may take as long
// as it likes (ask a person) and should return when ctx is done.
//
// Returning ErrSuspend (or an error wrapping it) suspends the run instead:
// Run returns a *SuspendedError carrying the run's state, and
// Agent.Resume continues it later with the decisions, in this process or
// another. Any other error ends the run with an *ApprovalError.
//
// An Approver is shared by the agent's runs: it must be safe for
// concurrent use.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) ([]run.Decision, error)
}

// ApprovalRequest lists the calls of one turn that need a decision.
// Calls[i].Spec says what each tool does (its Effect).
type ApprovalRequest struct {
	RunID string
	Turn  int
	Calls []run.PendingCall
}

// ApproverFunc adapts a function to an Approver.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) ([]run.Decision, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) ([]run.Decision, error) {
	return f(ctx, req)
}

// NotApproved is the reason DenyAll and a nil Approver give the model.
const NotApproved = "approval was not given"

// AllowAll approves every call.
var AllowAll Approver = ApproverFunc(func(_ context.Context, req ApprovalRequest) ([]run.Decision, error) {
	return decideAll(req, run.Approved, ""), nil
})

// DenyAll returns an Approver that denies every call with reason (the
// model reads "Tool call denied: <reason>"); empty means NotApproved.
func DenyAll(reason string) Approver {
	if reason == "" {
		reason = NotApproved
	}
	return ApproverFunc(func(_ context.Context, req ApprovalRequest) ([]run.Decision, error) {
		return decideAll(req, run.Denied, reason), nil
	})
}

// AllowReadOnly approves calls of read-only tools (llm.EffectReadOnly)
// and denies the others with a reason saying only read-only tools may
// run.
var AllowReadOnly Approver = ApproverFunc(func(_ context.Context, req ApprovalRequest) ([]run.Decision, error) {
	ds := make([]run.Decision, len(req.Calls))
	for i, c := range req.Calls {
		ds[i] = run.Decision{CallID: c.Call.ID, Action: run.Approved}
		if c.Spec.Effect != llm.EffectReadOnly {
			ds[i].Action = run.Denied
			ds[i].Reason = NotApproved + ": only read-only tools may run without asking"
		}
	}
	return ds, nil
})

func decideAll(req ApprovalRequest, a run.Action, reason string) []run.Decision {
	ds := make([]run.Decision, len(req.Calls))
	for i, c := range req.Calls {
		ds[i] = run.Decision{CallID: c.Call.ID, Action: a, Reason: reason}
	}
	return ds
}

// Rule is one rule of a Rules approver: calls of tools whose name matches
// Tool (a path.Match glob; empty matches any) and whose arguments match
// Args (a regular expression searched in the arguments' JSON text; empty
// matches any) get Action: run.Approved, run.Denied or run.Aborted, with
// Reason (for denials and aborts).
type Rule struct {
	Tool   string
	Args   string
	Action run.Action
	Reason string
}

type rule struct {
	Rule
	args *regexp.Regexp
}

// Rules returns an Approver that decides each call by the first rule that
// matches it, and asks otherwise (DenyAll() when otherwise is nil) about
// the calls no rule matches. A bad glob or regular expression, or an
// action other than approved, denied or aborted, is an error.
func Rules(rules []Rule, otherwise Approver) (Approver, error) {
	compiled := make([]rule, len(rules))
	for i, r := range rules {
		if _, err := path.Match(r.Tool, ""); err != nil {
			return nil, &ConfigError{Field: fmt.Sprintf("Rules[%d].Tool", i), Reason: fmt.Sprintf("bad glob %q: %v", r.Tool, err)}
		}
		switch r.Action {
		case run.Approved, run.Denied, run.Aborted:
		default:
			return nil, &ConfigError{Field: fmt.Sprintf("Rules[%d].Action", i), Reason: fmt.Sprintf("%q; want %q, %q or %q", r.Action, run.Approved, run.Denied, run.Aborted)}
		}
		compiled[i].Rule = r
		if r.Args != "" {
			re, err := regexp.Compile(r.Args)
			if err != nil {
				return nil, &ConfigError{Field: fmt.Sprintf("Rules[%d].Args", i), Reason: fmt.Sprintf("bad regular expression: %v", err)}
			}
			compiled[i].args = re
		}
	}
	if otherwise == nil {
		otherwise = DenyAll("")
	}
	return &rulesApprover{rules: compiled, otherwise: otherwise}, nil
}

type rulesApprover struct {
	rules     []rule
	otherwise Approver
}

func (a *rulesApprover) Approve(ctx context.Context, req ApprovalRequest) ([]run.Decision, error) {
	ds := make([]run.Decision, len(req.Calls))
	var rest []run.PendingCall
	var restAt []int
	for i, c := range req.Calls {
		if r, ok := a.match(c.Call); ok {
			ds[i] = run.Decision{CallID: c.Call.ID, Action: r.Action, Reason: r.Reason}
			if r.Action != run.Approved && ds[i].Reason == "" {
				ds[i].Reason = fmt.Sprintf("%s: a rule refuses %s calls like this one", NotApproved, c.Call.Name)
			}
			continue
		}
		rest = append(rest, c)
		restAt = append(restAt, i)
	}
	if len(rest) == 0 {
		return ds, nil
	}
	more, err := a.otherwise.Approve(ctx, ApprovalRequest{RunID: req.RunID, Turn: req.Turn, Calls: rest})
	if err != nil {
		return nil, err
	}
	if len(more) != len(rest) {
		return nil, &ApprovalError{Reason: fmt.Sprintf("the fallback approver gave %d decisions for %d calls", len(more), len(rest))}
	}
	byID := make(map[string]run.Decision, len(more))
	for _, d := range more {
		byID[d.CallID] = d
	}
	for j, c := range rest {
		d, ok := byID[c.Call.ID]
		if !ok {
			return nil, &ApprovalError{Reason: fmt.Sprintf("the fallback approver gave no decision for call %q", c.Call.ID)}
		}
		ds[restAt[j]] = d
	}
	return ds, nil
}

func (a *rulesApprover) match(c llm.ToolCall) (Rule, bool) {
	for _, r := range a.rules {
		if r.Tool != "" {
			if ok, _ := path.Match(r.Tool, c.Name); !ok {
				continue
			}
		}
		if r.args != nil && !r.args.MatchString(string(c.Args())) {
			continue
		}
		return r.Rule, true
	}
	return Rule{}, false
}
