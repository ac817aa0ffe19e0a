// Package tool defines what loom calls a tool: a spec the model sees and a
// function the driver runs with the model's JSON arguments.
//
// Beyond the [Tool] interface, the package holds the pieces every tool
// shares: a [Set] the driver looks tools up in, the typed
// constructor [Func] whose JSON Schema is inferred from a Go type and whose
// arguments are validated before the function runs, result truncation
// ([Truncate], [LimitResults]: of the text only; a result's images pass
// whole), middleware ([Chain], [Wrap]) and per-call approval
// ([Approvable], [NeedsApproval]).
//
// # Failures are data
//
// A tool that fails returns a result with IsError set and a message meant
// for the model: invalid arguments name the field and the rule broken, a
// function's error is its message, a panic is reported with its value (no
// stack trace). The model reads the result and can correct itself; the loop
// goes on. A Go error from Call is reserved for the machinery and fails the
// run.
//
// # Approval
//
// [llm.ToolSpec].NeedsApproval is a tool's default. When the need depends on
// the arguments (writing to .git/ needs approval, writing elsewhere does
// not), the tool implements [Approvable], and drivers ask [NeedsApproval],
// which consults it. Middleware built with [Wrap] keeps the decision of the
// tool it wraps.
package tool
