package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loomkit/loom/run"
)

// Sentinels for errors.Is. Each typed error below matches one of them.
var (
	// ErrConfig matches *ConfigError.
	ErrConfig = errors.New("agent: invalid config")
	// ErrSuspend is what an Approver returns to suspend the run until
	// decisions arrive; Run then returns a *SuspendedError, which matches
	// it too.
	ErrSuspend = errors.New("agent: run suspended for approval")
	// ErrStopped matches *StopError: a tool middleware or a turn hook
	// stopped the run on purpose.
	ErrStopped = errors.New("agent: run stopped")
	// ErrTool matches *ToolError: a tool's machinery failed.
	ErrTool = errors.New("agent: tool machinery failed")
	// ErrToolFailures matches *ToolFailuresError.
	ErrToolFailures = errors.New("agent: every tool call failed too many rounds in a row")
	// ErrBudget matches *BudgetError.
	ErrBudget = errors.New("agent: budget exhausted")
	// ErrOutput matches *OutputError.
	ErrOutput = errors.New("agent: final answer does not match the output schema")
	// ErrApproval matches *ApprovalError.
	ErrApproval = errors.New("agent: approval failed")
	// ErrCheckpoint matches *CheckpointError.
	ErrCheckpoint = errors.New("agent: checkpoint failed")
	// ErrResume matches *ResumeError.
	ErrResume = errors.New("agent: cannot resume run")
)

// ConfigError reports an agent Config, Input or Resumption that cannot be
// used. It is returned by Run, Stream and Resume before any model call.
type ConfigError struct {
	Field  string // the field at fault, e.g. "Model" or "Budget.Soft"
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("agent: invalid %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrConfig) match.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// RunError is what Run, Stream and Resume return when a run does not
// complete. Err is the cause (errors.Is and errors.As see through to it,
// so errors.Is(err, context.Canceled) works).
//
// Snapshot is set when the run can be continued: it was cancelled, the
// model kept failing, or a checkpoint could not be written. Pass it to
// Agent.Resume (or, with a Store, just the RunID). It is nil for runs that
// ended for good (a stop, a budget, a failed machine).
type RunError struct {
	RunID    string
	Err      error
	Snapshot json.RawMessage
}

func (e *RunError) Error() string {
	msg := fmt.Sprintf("agent: run %s: %v", e.RunID, e.Err)
	if e.Snapshot != nil {
		msg += " (the run can be resumed)"
	}
	return msg
}

// Unwrap returns the cause.
func (e *RunError) Unwrap() error { return e.Err }

// SuspendedError is returned when the Approver suspended the run
// (ErrSuspend) to wait for decisions about Calls. Continue it with
// Agent.Resume and the decisions, from this process or another one:
// by RunID when the agent has a Store, else with Snapshot.
type SuspendedError struct {
	RunID    string
	Turn     int
	Calls    []run.PendingCall // the calls waiting for a decision
	Snapshot json.RawMessage
}

func (e *SuspendedError) Error() string {
	names := make([]string, len(e.Calls))
	for i, c := range e.Calls {
		names[i] = c.Call.Name
	}
	return fmt.Sprintf("agent: run %s is suspended waiting for approval of %d call(s) [%s]; resume it with the decisions", e.RunID, len(e.Calls), strings.Join(names, ", "))
}

// Is makes errors.Is(err, ErrSuspend) match.
func (e *SuspendedError) Is(target error) bool { return target == ErrSuspend }

// StopError stops a run on purpose. A tool middleware (or a tool) returns
// one from Call, or a TurnHook returns one, and the run ends with it:
// calls of the batch that have not started never start, running ones
// finish, and no result of the batch is committed. Make one with Stop.
type StopError struct {
	Reason string
}

// Stop returns a *StopError with reason.
func Stop(reason string) error { return &StopError{Reason: reason} }

func (e *StopError) Error() string { return "agent: run stopped: " + e.Reason }

// Is makes errors.Is(err, ErrStopped) match.
func (e *StopError) Is(target error) bool { return target == ErrStopped }

// SkipError, returned from a tool's Call (usually by a tool middleware
// that did not call the tool), skips the call: its result is
// SkippedPrefix followed by Reason, marked as an error, and the run goes
// on. Make one with Skip.
type SkipError struct {
	Reason string
}

// Skip returns a *SkipError with reason, for tool middleware.
func Skip(reason string) error { return &SkipError{Reason: reason} }

func (e *SkipError) Error() string { return "agent: tool call skipped: " + e.Reason }

// ToolError reports a tool whose Call returned a Go error: its machinery
// failed (the tool's own failures are error results the model reads).
// The run ends; the tool's error is Err.
type ToolError struct {
	Tool   string
	CallID string
	Err    error
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("agent: tool %s (call %s) failed: %v (a tool reports its own failures as error results; a Go error means its machinery broke)", e.Tool, e.CallID, e.Err)
}

// Unwrap returns the tool's error.
func (e *ToolError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrTool) match.
func (e *ToolError) Is(target error) bool { return target == ErrTool }

// ToolFailuresError reports Rounds consecutive tool rounds in which every
// call failed (Config.MaxFailedRounds). The model is not making progress.
type ToolFailuresError struct {
	Rounds int
	Last   []string // the error results of the last round
}

func (e *ToolFailuresError) Error() string {
	msg := fmt.Sprintf("agent: every tool call failed in %d rounds in a row; stopping (raise Config.MaxFailedRounds, or fix the tools or the prompt)", e.Rounds)
	if len(e.Last) > 0 {
		msg += ": last errors: " + strings.Join(e.Last, " | ")
	}
	return msg
}

// Is makes errors.Is(err, ErrToolFailures) match.
func (e *ToolFailuresError) Is(target error) bool { return target == ErrToolFailures }

// BudgetError reports a hard budget limit reached with Budget.Fail set,
// or a cost budget for a model without a known price.
type BudgetError struct {
	Limit  string  // "tokens", "cost", "time" or "tool_calls"
	Max    float64 // the limit, in tokens, USD, seconds or calls
	Used   float64 // what the run used
	Reason string  // set when the budget cannot be enforced
}

func (e *BudgetError) Error() string {
	if e.Reason != "" {
		return "agent: budget: " + e.Reason
	}
	return fmt.Sprintf("agent: %s budget exhausted: used %s of %s (raise Budget, or clear Budget.Fail to get a final answer instead)", e.Limit, formatAmount(e.Limit, e.Used), formatAmount(e.Limit, e.Max))
}

func formatAmount(limit string, v float64) string {
	switch limit {
	case "cost":
		return fmt.Sprintf("$%.4f", v)
	case "time":
		return (time.Duration(v * float64(time.Second))).Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%.0f", v)
}

// Is makes errors.Is(err, ErrBudget) match.
func (e *BudgetError) Is(target error) bool { return target == ErrBudget }

// OutputError reports a final answer that does not match the output
// schema after the turn budget ran out of re-prompts.
type OutputError struct {
	Output string // the model's last answer
	Err    error  // why it does not match
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("agent: the final answer does not match the output schema and no turn is left to ask again: %v", e.Err)
}

// Unwrap returns the validation error.
func (e *OutputError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrOutput) match.
func (e *OutputError) Is(target error) bool { return target == ErrOutput }

// ApprovalError reports an Approver that failed, or whose decisions do
// not fit the calls it was asked about.
type ApprovalError struct {
	Reason string
	Err    error
}

func (e *ApprovalError) Error() string {
	msg := "agent: approval: " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *ApprovalError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrApproval) match.
func (e *ApprovalError) Is(target error) bool { return target == ErrApproval }

// CheckpointError reports a write to (or read from) Config.Store that
// failed. The run stops at once: nothing after the last successful write
// is saved, and nothing is reported saved that was not.
type CheckpointError struct {
	Op  string // what was being written: "tool intent", "model turn", ...
	Err error
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("agent: checkpoint (%s) failed, so the run stopped; what was saved before it is intact: %v", e.Op, e.Err)
}

// Unwrap returns the store's error.
func (e *CheckpointError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCheckpoint) match.
func (e *CheckpointError) Is(target error) bool { return target == ErrCheckpoint }

// ResumeError reports a run that cannot be resumed: its journal or
// snapshot is unreadable, it failed for good, the agent's config no longer
// fits it, or the decisions do not fit it.
type ResumeError struct {
	RunID  string
	Reason string
	Err    error
}

func (e *ResumeError) Error() string {
	msg := fmt.Sprintf("agent: cannot resume run %s: %s", e.RunID, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *ResumeError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrResume) match.
func (e *ResumeError) Is(target error) bool { return target == ErrResume }
