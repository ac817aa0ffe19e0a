package run_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
)

// snapshot returns r's JSON encoding.
func snapshot(t testing.TB, r *run.Run) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}

// refused asserts that call returns a *ProtocolError and leaves r exactly
// as it was.
func refused(t testing.TB, r *run.Run, what string, call func() error) *run.ProtocolError {
	t.Helper()
	before := snapshot(t, r)
	err := call()
	var pe *run.ProtocolError
	if !errors.As(err, &pe) || !errors.Is(err, run.ErrProtocol) {
		t.Fatalf("%s: want *ProtocolError, got %v", what, err)
	}
	if after := snapshot(t, r); after != before {
		t.Fatalf("%s changed the run:\nbefore %s\nafter  %s", what, before, after)
	}
	return pe
}

// failedWith asserts that every later Next returns a *FailedError wrapping
// target.
func failedWith(t testing.TB, r *run.Run, target error) {
	t.Helper()
	if r.State() != run.StateFailed {
		t.Fatalf("state = %s, want Failed", r.State())
	}
	for range 2 {
		_, err := r.Next()
		if !errors.Is(err, run.ErrFailed) || !errors.Is(err, target) {
			t.Fatalf("Next after failure = %v, want *FailedError wrapping %v", err, target)
		}
	}
	if !errors.Is(r.Err(), target) {
		t.Fatalf("Err() = %v", r.Err())
	}
}

func prompt(text string) llm.Message { return llm.UserText(text) }

// toolLoop answers every model call with one call of tool name.
func callEveryTurn(name string) func(run.CallModel) (llm.Response, error) {
	return func(cm run.CallModel) (llm.Response, error) {
		return runtest.Answer(runtest.Call("", name, `{}`)), nil
	}
}

// checkRequests wraps a model so that every request's history is checked
// for the pairing invariant.
func checkRequests(t testing.TB, model func(run.CallModel) (llm.Response, error)) func(run.CallModel) (llm.Response, error) {
	return func(cm run.CallModel) (llm.Response, error) {
		t.Helper()
		if err := llm.CheckHistory(cm.Request.Messages); err != nil {
			t.Fatalf("turn %d request: %v", cm.Turn, err)
		}
		return model(cm)
	}
}
