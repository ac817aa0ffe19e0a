package tool

import "encoding/json"

// Approvable is implemented by tools whose need for approval depends on the
// arguments of a call: write_file needs approval to write .git/config, and
// none to write main.go. NeedsApproval is given the call's arguments as the
// model sent them (a JSON object) and must be cheap, safe for concurrent
// use, and free of side effects. It must answer true for arguments it cannot
// judge unless the call cannot do anything with them (arguments that fail
// validation never reach the tool's function).
//
// A decision is about those exact arguments: a driver that lets a person
// edit the arguments asks again for the edited ones.
type Approvable interface {
	NeedsApproval(args json.RawMessage) bool
}

// NeedsApproval reports whether a call of t with args needs a decision
// before it runs: t's own answer when t is [Approvable], else the
// NeedsApproval of its spec. Drivers ask this rather than reading the spec.
func NeedsApproval(t Tool, args json.RawMessage) bool {
	if a, ok := t.(Approvable); ok {
		return a.NeedsApproval(args)
	}
	return t.Spec().NeedsApproval
}
