// Package ui renders the events of agent runs for loom: as text for people
// (Text: the answer streamed on one writer, tool calls, results, retries and
// usage on another, with colours and a spinner on a terminal) and as JSON
// Lines for programs (JSONL, whose line shapes are part of loom's contract).
//
// Both implement Sink. A Sink is safe for concurrent use, though the agent
// delivers a run's events on one goroutine.
package ui

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
)

// Sink receives what happens in a run: Start first, then the agent's
// events, then Done or Fail.
type Sink interface {
	// Start opens a run (or the resumption of one) of model (as the user
	// named it, "openai:gpt-4o").
	Start(runID, model string, resumed bool)
	// Event reports one agent event.
	Event(ev agent.Event)
	// Done closes a run that completed.
	Done(res agent.Result)
	// Fail closes a run that did not complete. resumable says whether
	// loom resume can continue it.
	Fail(runID string, err error, resumable bool)
}

// Kind names the kind of failure err is, for the "kind" of a JSON Lines
// error line and for people: "interrupted", a model.Kind ("auth",
// "rate_limited", ...), "max_turns", "budget", "stopped", "unknown_tool",
// "truncated", "tool", "tool_failures", "checkpoint", "approval",
// "output", "resume", "config", "claimed" or "error".
func Kind(err error) string {
	var me *model.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, ErrInterrupted):
		return "interrupted"
	case errors.As(err, &me):
		return string(me.Kind)
	case errors.Is(err, run.ErrMaxTurns):
		return "max_turns"
	case errors.Is(err, agent.ErrBudget):
		return "budget"
	case errors.Is(err, agent.ErrStopped), errors.Is(err, run.ErrStopped):
		return "stopped"
	case errors.Is(err, run.ErrUnknownTool):
		return "unknown_tool"
	case errors.Is(err, run.ErrTruncated):
		return "truncated"
	case errors.Is(err, agent.ErrToolFailures):
		return "tool_failures"
	case errors.Is(err, agent.ErrTool):
		return "tool"
	case errors.Is(err, store.ErrClaimed):
		return "claimed"
	case errors.Is(err, agent.ErrCheckpoint):
		return "checkpoint"
	case errors.Is(err, agent.ErrApproval):
		return "approval"
	case errors.Is(err, agent.ErrOutput):
		return "output"
	case errors.Is(err, agent.ErrResume):
		return "resume"
	case errors.Is(err, agent.ErrConfig), errors.Is(err, run.ErrConfig):
		return "config"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "error"
}

// ErrInterrupted is the cause loom gives a run's context when the user
// pressed Ctrl-C (or the process got SIGTERM). It wraps context.Canceled,
// so that the run is seen as cancelled (and resumable), not as failed.
var ErrInterrupted = fmt.Errorf("interrupted by the user: %w", context.Canceled)

// IsTerminal reports whether f is a terminal (a character device that is
// not the null device). It is a heuristic that needs no system calls
// beyond stat, and is right for the terminals, pipes and files loom meets.
func IsTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}

// ColorAllowed reports whether colours may be used on a terminal: not when
// NO_COLOR is set to anything (https://no-color.org) or TERM is "dumb".
func ColorAllowed(getenv func(string) string) bool {
	return getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

// Message says what went wrong in a failed run, for people: the cause
// without the wrapper that names the run (shown apart), and the turn
// budget in words rather than in the library's terms.
func Message(err error) string {
	var mt *run.MaxTurnsError
	if errors.As(err, &mt) {
		return fmt.Sprintf("the turn budget of %d model calls is spent, and the model was not done", mt.MaxTurns)
	}
	if Kind(err) == "interrupted" {
		return "interrupted"
	}
	var re *agent.RunError
	if errors.As(err, &re) && re.Err != nil {
		err = re.Err
	}
	return err.Error()
}
