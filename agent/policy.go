package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomkit/loom/run"
)

// InvalidToolPolicy decides what to do with a tool call whose name is not
// allowed on its turn (a hallucinated or misspelled tool). It returns one
// of run.Fail, run.Retry, run.Repair, run.Skip or run.Stop; see package
// run for what each does. It must be safe for concurrent use.
type InvalidToolPolicy interface {
	Resolve(ctx context.Context, call InvalidCall) run.Resolution
}

// InvalidCall describes an invalid tool call to an InvalidToolPolicy.
type InvalidCall struct {
	RunID string
	run.ResolveToolCall
	// RetriesLeft is how many run.Retry resolutions the run still accepts
	// (Config.MaxInvalidRetries less those spent).
	RetriesLeft int
}

// InvalidToolPolicyFunc adapts a function to an InvalidToolPolicy.
type InvalidToolPolicyFunc func(ctx context.Context, call InvalidCall) run.Resolution

// Resolve calls f.
func (f InvalidToolPolicyFunc) Resolve(ctx context.Context, call InvalidCall) run.Resolution {
	return f(ctx, call)
}

// DefaultInvalidToolPolicy repairs the call to the single closest allowed
// name when there is one (case, '-' versus '_', or up to two edits apart:
// run.ResolveToolCall.Suggestion); otherwise it re-prompts the model with
// a result listing the available tools while retries are left; otherwise
// it fails the run with run.ErrUnknownTool.
var DefaultInvalidToolPolicy InvalidToolPolicy = InvalidToolPolicyFunc(defaultResolve)

func defaultResolve(_ context.Context, c InvalidCall) run.Resolution {
	if c.Suggestion != "" {
		return run.Repair{Name: c.Suggestion}
	}
	if c.RetriesLeft > 0 {
		return run.Retry{Feedback: UnknownToolFeedback(c.Call.Name, c.Allowed)}
	}
	return run.Fail{}
}

// UnknownToolFeedback is the result DefaultInvalidToolPolicy gives the
// model for a call of a tool that does not exist.
func UnknownToolFeedback(name string, allowed []string) string {
	if len(allowed) == 0 {
		return fmt.Sprintf("There is no tool named %q, and no tool may be called now. Answer without tools.", name)
	}
	return fmt.Sprintf("There is no tool named %q. The available tools are: %s. Call one of them by its exact name, or answer without tools.", name, strings.Join(allowed, ", "))
}
