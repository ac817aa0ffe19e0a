package main

import (
	"strings"
	"testing"

	"github.com/loomkit/loom/loomtest"
)

func TestRunTextAnswer(t *testing.T) {
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("Hello from the model.")}})
	r := h.run("run", "say hello").want(t, 0)
	if r.stdout != "Hello from the model.\n" {
		t.Errorf("stdout = %q, want the answer and a newline", r.stdout)
	}
	if !strings.Contains(r.stderr, "run_") {
		t.Errorf("stderr does not name the run\n%s", r)
	}
	t.Log(r)
}
