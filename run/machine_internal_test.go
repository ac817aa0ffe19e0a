package run

import (
	"errors"
	"testing"

	"github.com/loomkit/loom/llm"
)

// A transition that does not complete (here: a bug simulated by corrupting
// the run so the transition panics) leaves the run Failed, never half-way
// (SEMANTICS §2).
func TestInterruptedTransitionLeavesTheRunFailed(t *testing.T) {
	r := New(Config{Prompt: llm.UserText("x"), Tools: []llm.ToolSpec{{Name: "add"}}})
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if err := r.ModelResponse(llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "c1", Name: "nope"}}}}); err != nil {
		t.Fatal(err)
	}
	r.mt = nil // the bug
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		r.Next()
	}()
	if r.State() != StateFailed {
		t.Fatalf("state = %s", r.State())
	}
	_, err := r.Next()
	if !errors.Is(err, ErrFailed) || !errors.Is(err, errInterrupted) {
		t.Fatalf("err = %v", err)
	}
}

// Every state has a name, and every input a name, so that protocol errors
// always say where and what.
func TestNames(t *testing.T) {
	for s := statePreparing; s <= stateFailed; s++ {
		if s.String() == "" {
			t.Errorf("state %d has no name", s)
		}
	}
	for in := inNext; in <= inWrapUp; in++ {
		if inputNames[in] == "" {
			t.Errorf("input %d has no name", in)
		}
	}
}
