package run

import (
	"errors"
	"fmt"
	"strings"

	"github.com/loomkit/loom/llm"
)

// Sentinels for errors.Is. Each typed error below matches exactly one.
var (
	// ErrProtocol matches *ProtocolError: the driver called a method that
	// does not fit the run's state or fed input that does not fit the step.
	ErrProtocol = errors.New("run: protocol violation")
	// ErrMaxTurns matches *MaxTurnsError.
	ErrMaxTurns = errors.New("run: turn budget exhausted")
	// ErrUnknownTool matches *UnknownToolError.
	ErrUnknownTool = errors.New("run: invalid tool call")
	// ErrStopped matches *StoppedError.
	ErrStopped = errors.New("run: stopped")
	// ErrTruncated matches *TruncatedError.
	ErrTruncated = errors.New("run: model turn truncated")
	// ErrConfig matches *ConfigError.
	ErrConfig = errors.New("run: invalid config")
	// ErrFailed matches *FailedError, returned by every call on a run that
	// has already failed.
	ErrFailed = errors.New("run: run already failed")
	// ErrSnapshot matches *SnapshotError.
	ErrSnapshot = errors.New("run: unreadable snapshot")
)

// ProtocolError reports a call that does not fit the run's state, or input
// that does not fit the step it answers. The run is left exactly as it was:
// the correct call afterwards still succeeds.
type ProtocolError struct {
	Op     string // the method called, e.g. "ToolResults"
	State  string // the run's state name at the time
	Reason string // what was wrong
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("run: %s in state %s: %s (the run is unchanged; %s)", e.Op, e.State, e.Reason, stateHint(e.State))
}

// Is makes errors.Is(err, ErrProtocol) match.
func (e *ProtocolError) Is(target error) bool { return target == ErrProtocol }

// stateHint says what the driver should do in a state.
func stateHint(state string) string {
	switch state {
	case StatePreparingRequest:
		return "call Next to get the model call"
	case StateAwaitingModel:
		return "feed the model's answer with ModelResponse"
	case StateResolvingToolCalls:
		return "answer the ResolveToolCall step with Resolve"
	case StateAwaitingApproval:
		return "answer the ApproveTools step with Approve"
	case StateAwaitingAdvance:
		return "call Next (or RetryTurn for a tool-free turn)"
	case StateExecutingTools:
		return "run the CallTools step and feed ToolResults"
	case StateDone:
		return "the run is done; read Response"
	}
	return "the run has failed; read Err"
}

// MaxTurnsError reports that a model call was needed after the turn budget
// was spent. Raise Config.MaxTurns, or set GracefulLastTurn so the last
// allowed call is made without tools and ends the run with its text.
type MaxTurnsError struct {
	MaxTurns int // the budget
}

func (e *MaxTurnsError) Error() string {
	return fmt.Sprintf("run: the turn budget of %d model call(s) is spent and another call is needed (raise Config.MaxTurns, or set GracefulLastTurn to end with a tool-free answer)", e.MaxTurns)
}

// Is makes errors.Is(err, ErrMaxTurns) match.
func (e *MaxTurnsError) Is(target error) bool { return target == ErrMaxTurns }

// UnknownToolError reports a tool call whose name is not allowed on its
// turn and that was not recovered: resolved with Fail, Retry beyond the
// retry budget, Repair to a name that is not allowed either (Name is then the
// repaired name), or Skip under tool choice none.
type UnknownToolError struct {
	Name    string   // the offending name
	CallID  string   // the call's id
	Allowed []string // the names allowed on that turn, sorted
	Reason  string   // why the resolution did not recover the call
}

func (e *UnknownToolError) Error() string {
	allowed := "no tool is allowed on this turn"
	if len(e.Allowed) > 0 {
		allowed = "allowed: " + strings.Join(e.Allowed, ", ")
	}
	return fmt.Sprintf("run: tool call %s names %q, which is not allowed (%s): %s", e.CallID, e.Name, allowed, e.Reason)
}

// Is makes errors.Is(err, ErrUnknownTool) match.
func (e *UnknownToolError) Is(target error) bool { return target == ErrUnknownTool }

// StoppedError reports a run stopped on purpose: a Stop resolution, an
// aborted approval, or a driver that gave up (an empty ToolResults, a retry
// of a tool-bearing turn). Reason is passed through unchanged.
type StoppedError struct {
	Reason string
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("run: stopped: %s (start a new run to continue the conversation)", e.Reason)
}

// Is makes errors.Is(err, ErrStopped) match.
func (e *StoppedError) Is(target error) bool { return target == ErrStopped }

// TruncatedError reports a model turn that delivered no answer (no tool
// call, no text, no image) and stopped for FinishReason (length or content
// filter). Raise MaxTokens, or rephrase the request for a content filter.
type TruncatedError struct {
	FinishReason llm.FinishReason
}

func (e *TruncatedError) Error() string {
	hint := "raise MaxTokens or shorten the request"
	if e.FinishReason == llm.FinishContentFilter {
		hint = "the provider withheld the answer; rephrase the request"
	}
	return fmt.Sprintf("run: the model produced no answer and stopped with finish reason %q (%s)", e.FinishReason, hint)
}

// Is makes errors.Is(err, ErrTruncated) match.
func (e *TruncatedError) Is(target error) bool { return target == ErrTruncated }

// ConfigError reports a Config the run cannot work with. It is found by New
// and returned (inside a *FailedError) by the first Next, before any model
// call is made.
type ConfigError struct {
	Field  string // the Config field at fault
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("run: invalid Config.%s: %s (fix the config and start a new run)", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrConfig) match.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// FailedError is what every call returns once the run has failed. It wraps
// the error that failed it, so errors.Is and errors.As see both.
type FailedError struct {
	Err error
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("run: the run has already failed and cannot continue (start a new run): %v", e.Err)
}

// Unwrap returns the error that failed the run.
func (e *FailedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrFailed) match.
func (e *FailedError) Is(target error) bool { return target == ErrFailed }

// SnapshotError reports a snapshot UnmarshalJSON cannot restore: another
// format, an unknown field, or an inconsistent state.
type SnapshotError struct {
	Format int // the snapshot's format number, 0 when absent
	Reason string
}

func (e *SnapshotError) Error() string {
	return fmt.Sprintf("run: cannot restore snapshot of format %d (this version reads format %d): %s", e.Format, Format, e.Reason)
}

// Is makes errors.Is(err, ErrSnapshot) match.
func (e *SnapshotError) Is(target error) bool { return target == ErrSnapshot }
