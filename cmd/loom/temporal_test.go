package main

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
)

// temporalAddr is the Temporal dev server scripts/test starts; without it
// the tests skip, except under CI=true, where they fail.
func temporalAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("LOOM_TEMPORAL_ADDR")
	if addr == "" {
		msg := "LOOM_TEMPORAL_ADDR is not set: run scripts/test, which starts a Temporal dev server, or start one (.cache/bin/temporal server start-dev) and set LOOM_TEMPORAL_ADDR=127.0.0.1:PORT"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return addr
}

// startWorker runs loom worker on a task queue of the test's own.
func (h *harness) startWorker(addr string) string {
	h.t.Helper()
	queue := "loom-cli-test-" + strings.ToLower(rand.Text()[:10])
	w := h.start("worker", "--temporal", addr, "--queue", queue)
	w.waitFor(h.t, "the worker to start", func(_, stderr string) bool { return strings.Contains(stderr, "loom worker: task queue") })
	return queue
}

func TestTemporalRun(t *testing.T) {
	addr := temporalAddr(t)
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		call("c1", "read_file", `{"path":"a.txt"}`),
		bash("c2", "touch made-on-temporal"),
		loomtest.Text("Done on Temporal."),
	}})
	h.writeFile("a.txt", "alpha\n")
	queue := h.startWorker(addr)
	r := h.run("run", "--temporal", addr, "--queue", queue, "--yes", "--output", "jsonl", "read and touch").want(t, 0)
	ls := lines(t, r.stdout)
	first, last := ls[0], ls[len(ls)-1]
	if first["type"] != "run_started" || last["type"] != "done" || last["output"] != "Done on Temporal." || last["turns"] != float64(3) {
		t.Fatalf("first %v, last %v\n%s", first, last, r)
	}
	res := ofType(ls, "tool_result")
	if len(res) != 2 || !strings.Contains(fmt.Sprint(res[0]["content"]), "alpha") {
		t.Errorf("tool results = %v", res)
	}
	if _, err := os.Stat(filepath.Join(h.ws, "made-on-temporal")); err != nil {
		t.Error("the approved command did not run on the worker")
	}
	// The same script in process gives the same answer.
	if sys := h.srv.Requests()[0].Decoded.System; !strings.Contains(sys, "You are loom") {
		t.Errorf("the system prompt did not reach the model: %q", sys)
	}
	// loom runs --temporal lists it (the server's listing lags a moment).
	id := first["run_id"]
	deadline := time.Now().Add(20 * time.Second)
	for {
		var row map[string]any
		for _, l := range lines(t, h.run("runs", "--temporal", addr, "--limit", "0", "--output", "jsonl").want(t, 0).stdout) {
			if l["id"] == id {
				row = l
			}
		}
		if row["status"] == "done" {
			if row["model"] != "openai:test-model" || row["prompt"] != "read and touch" || row["turns"] != nil {
				t.Errorf("loom runs --temporal: %v", row)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("loom runs --temporal does not list %v as done: %v", id, row)
		}
		time.Sleep(200 * time.Millisecond)
	}
	text := h.run("runs", "--temporal", addr).want(t, 0)
	if !strings.Contains(text.stdout, fmt.Sprint(id)) || !strings.Contains(text.stdout, "read and touch") {
		t.Errorf("loom runs --temporal in text:\n%s", text)
	}
	h.run("runs", "--temporal", addr, "--store", h.store).want(t, 2)
}

func TestTemporalApprove(t *testing.T) {
	addr := temporalAddr(t)
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		loomtest.ToolCalls(
			loomtest.Call("c1", "bash", `{"command":"touch approved-later"}`),
			loomtest.Call("c2", "bash", `{"command":"touch denied-later"}`),
			loomtest.Call("c3", "bash", `{"command":"echo needs no approval"}`),
		),
		loomtest.Text("Approved from elsewhere."),
	}})
	queue := h.startWorker(addr)
	r := h.start("run", "--temporal", addr, "--queue", queue, "make it")
	r.waitFor(t, "the approval request", func(_, stderr string) bool { return strings.Contains(stderr, "loom approve --temporal") })
	if _, err := os.Stat(filepath.Join(h.ws, "approved-later")); err == nil {
		t.Fatal("the command ran before it was approved")
	}
	_, stderr := r.output()
	id := runIDFrom(t, stderr)
	// c3 (echo) needed no approval; deciding about it is refused.
	h.run("approve", "--temporal", addr, id, "c3").want(t, 2)
	h.run("approve", "--temporal", addr, id, "c2=maybe").want(t, 2)
	a := h.run("approve", "--temporal", addr, id, "c1", "c2=deny:not in this directory").want(t, 0)
	if !strings.Contains(a.stderr, "sent 2 decision(s)") {
		t.Errorf("loom approve said:\n%s", a)
	}
	res := r.wait(t).want(t, 0)
	if res.stdout != "Approved from elsewhere.\n" {
		t.Errorf("stdout = %q\n%s", res.stdout, res)
	}
	if _, err := os.Stat(filepath.Join(h.ws, "approved-later")); err != nil {
		t.Error("the approved command did not run")
	}
	if _, err := os.Stat(filepath.Join(h.ws, "denied-later")); err == nil {
		t.Error("the denied command ran")
	}
	if got := h.requestText(1); !strings.Contains(got, "not in this directory") || !strings.Contains(got, "needs no approval") {
		t.Errorf("the model did not get the denial's reason and the free call's output:\n%s", got)
	}
	// A second decision about the same call is refused.
	h.run("approve", "--temporal", addr, id).want(t, 2)
}

func TestTemporalInterrupt(t *testing.T) {
	addr := temporalAddr(t)
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		{Parts: []llm.Part{llm.Text{Text: "never"}}, HeaderDelay: time.Minute},
	}})
	queue := h.startWorker(addr)
	r := h.start("run", "--temporal", addr, "--queue", queue, "--output", "jsonl", "slow")
	startedRunID(t, r)
	waitRequests(t, h.srv, 1)
	r.cmd.Process.Signal(syscall.SIGINT)
	res := r.wait(t).want(t, 130)
	ls := lines(t, res.stdout)
	if last := ls[len(ls)-1]; last["type"] != "error" || last["kind"] != "interrupted" {
		t.Errorf("last line = %v", last)
	}
}

func TestTemporalBadConfig(t *testing.T) {
	h := newHarness(t, loomtest.Config{})
	for _, args := range [][]string{
		{"worker"},
		{"approve", "run_x"},
		{"run", "--temporal", "127.0.0.1:1", "x"},
	} {
		r := h.run(args...).want(t, 2).noStackTrace(t)
		if !strings.HasPrefix(r.stderr, "loom: ") {
			t.Errorf("loom %v: stderr %q", args, r.stderr)
		}
	}
}
