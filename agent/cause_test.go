package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/model/modeltest"
)

// A caller that cancels with a cause of its own (a CLI's Ctrl-C) still
// gets a resumable run: the error wraps both the cause and the cancellation.
func TestCancelWithCauseIsResumable(t *testing.T) {
	interrupted := errors.New("interrupted by the user")
	ctx, cancel := context.WithCancelCause(context.Background())
	m := modeltest.NewScript(modeltest.Turn{Delay: 1 << 40})
	a := agent.New(agent.Config{Model: m})
	cancel(interrupted)
	_, err := a.Run(ctx, agent.Prompt("hi"))
	var re *agent.RunError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want *agent.RunError", err)
	}
	if !errors.Is(err, interrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want it to wrap the cause and context.Canceled", err)
	}
	if re.Snapshot == nil {
		t.Fatalf("a cancelled run has no snapshot to resume from: %v", err)
	}
}
