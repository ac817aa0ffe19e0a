package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
)

// runsByID returns loom runs --output jsonl as a map by id.
func (h *harness) runsByID() map[string]map[string]any {
	h.t.Helper()
	r := h.run("runs", "--output", "jsonl").want(h.t, 0)
	out := map[string]map[string]any{}
	for _, l := range lines(h.t, r.stdout) {
		out[fmt.Sprint(l["id"])] = l
	}
	return out
}

// startedRunID waits for the run_started line of a jsonl run and returns
// its run id.
func startedRunID(t *testing.T, r *running) string {
	t.Helper()
	r.waitFor(t, "run_started", func(out, _ string) bool { return strings.Contains(out, `"run_started"`) })
	out, _ := r.output()
	var l struct {
		RunID string `json:"run_id"`
	}
	json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &l)
	return l.RunID
}

// TestInterruptDuringTool: Ctrl-C while a slow tool runs ends loom with
// status 130 after the run was checkpointed with the call answered as
// interrupted (ADVERSARIAL 39); loom resume goes on from there.
func TestInterruptDuringTool(t *testing.T) {
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		bash("c1", "touch started && sleep 37"),
		loomtest.Text("resumed and finished"),
	}})
	r := h.start("run", "--yes", "--output", "jsonl", "wait a while")
	id := startedRunID(t, r)
	waitFile(t, filepath.Join(h.ws, "started"))
	start := time.Now()
	r.cmd.Process.Signal(syscall.SIGINT)
	res := r.wait(t).want(t, 130)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("loom took %s to stop after Ctrl-C", d)
	}
	ls := lines(t, res.stdout)
	last := ls[len(ls)-1]
	if last["type"] != "error" || last["kind"] != "interrupted" || last["run_id"] != id {
		t.Errorf("last line = %v, want an interrupted error for %s", last, id)
	}
	tr := ofType(ls, "tool_result")
	if len(tr) != 1 || tr[0]["is_error"] != true || !strings.Contains(fmt.Sprint(tr[0]["content"]), "interrupted") {
		t.Errorf("the call was not answered as interrupted: %v", tr)
	}
	// The command's processes were killed with the turn.
	if pids := processesRunning("sleep 37"); len(pids) > 0 {
		t.Errorf("the interrupted command still runs: pids %v", pids)
	}
	if st := h.runsByID()[id]["status"]; st != "interrupted" {
		t.Errorf("loom runs says %s is %v, want interrupted", id, st)
	}
	// Resume: the model gets the history with the interrupted result, and
	// the run finishes.
	rr := h.run("resume", id).want(t, 0)
	if rr.stdout != "resumed and finished\n" {
		t.Errorf("resume stdout = %q\n%s", rr.stdout, rr)
	}
	if got := h.requestText(1); !strings.Contains(got, "interrupted") || !strings.Contains(got, "touch started") {
		t.Errorf("the resumed request lacks the interrupted call:\n%s", got)
	}
	if st := h.runsByID()[id]["status"]; st != "done" {
		t.Errorf("after resume, %s is %v, want done", id, st)
	}
}

// TestInterruptDuringModelCall: Ctrl-C while the model is slow to answer.
func TestInterruptDuringModelCall(t *testing.T) {
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		{Parts: []llm.Part{llm.Text{Text: "too late"}}, HeaderDelay: 30 * time.Second},
		loomtest.Text("second try"),
	}})
	r := h.start("run", "slow model")
	r.waitFor(t, "the run id", func(_, stderr string) bool { return strings.Contains(stderr, "run_") })
	waitRequests(t, h.srv, 1)
	r.cmd.Process.Signal(syscall.SIGINT)
	res := r.wait(t).want(t, 130)
	id := runIDFrom(t, res.stderr)
	if !strings.Contains(res.stderr, "interrupted") || !strings.Contains(res.stderr, "loom resume "+id) {
		t.Errorf("stderr does not say how to resume\n%s", res)
	}
	h.run("resume", id).want(t, 0)
	if n := len(h.srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// TestResumeAfterKill: loom killed (SIGKILL) in the middle of a model call
// and in the middle of a tool; loom resume takes the run over at once and
// finishes it. A command that had started is not run again: the model is
// told it may or may not have taken effect (ADVERSARIAL 38, 71).
func TestResumeAfterKill(t *testing.T) {
	t.Run("during a model call", func(t *testing.T) {
		h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
			call("c1", "read_file", `{"path":"a.txt"}`),
			{Parts: []llm.Part{llm.Text{Text: "never sent"}}, HeaderDelay: 30 * time.Second},
			loomtest.Text("finished after the crash"),
		}})
		h.writeFile("a.txt", "alpha\n")
		r := h.start("run", "--output", "jsonl", "read a.txt")
		id := startedRunID(t, r)
		waitRequests(t, h.srv, 2)
		r.cmd.Process.Kill()
		r.wait(t)
		if st := h.runsByID()[id]["status"]; st != "interrupted" {
			t.Errorf("loom runs says the killed run is %v, want interrupted", st)
		}
		rr := h.run("resume", "--output", "jsonl", id).want(t, 0)
		ls := lines(t, rr.stdout)
		if last := ls[len(ls)-1]; last["type"] != "done" || last["output"] != "finished after the crash" {
			t.Errorf("resume ended with %v", last)
		}
		// The completed turn and tool result were kept: the third request
		// carries the file read before the crash.
		if got := h.requestText(2); !strings.Contains(got, "alpha") {
			t.Errorf("the resumed request lost the tool result:\n%s", got)
		}
	})
	t.Run("during a command", func(t *testing.T) {
		// The killed loom cannot kill its command; the test does.
		t.Cleanup(func() { killProcesses("sleep 29") })
		h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
			bash("c1", "echo once >> effects.txt && sleep 29"),
			loomtest.Text("done after the crash"),
		}})
		r := h.start("run", "--yes", "--output", "jsonl", "append")
		id := startedRunID(t, r)
		waitFile(t, filepath.Join(h.ws, "effects.txt"))
		r.cmd.Process.Kill()
		r.wait(t)
		h.run("resume", id).want(t, 0)
		b, _ := os.ReadFile(filepath.Join(h.ws, "effects.txt"))
		if string(b) != "once\n" {
			t.Errorf("effects.txt = %q: the command ran again after resume", b)
		}
		if got := h.requestText(1); !strings.Contains(got, "may or may not have taken effect") {
			t.Errorf("the model was not told the command may have run:\n%s", got)
		}
	})
}

func TestResumeFinishedRun(t *testing.T) {
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		loomtest.Text("Nice to meet you, Ada."),
		loomtest.Text("Your name is Ada."),
	}})
	first := h.run("run", "My name is Ada.").want(t, 0)
	id := runIDFrom(t, first.stderr)
	// Without a prompt: the answer again, no model call.
	again := h.run("resume", id).want(t, 0)
	if again.stdout != "Nice to meet you, Ada.\n" || len(h.srv.Requests()) != 1 {
		t.Errorf("resuming a done run: stdout %q, %d requests\n%s", again.stdout, len(h.srv.Requests()), again)
	}
	// With a prompt: a new run in the same conversation. An unambiguous
	// prefix of the id is enough.
	next := h.run("resume", id[:12], "What is my name?").want(t, 0)
	if next.stdout != "Your name is Ada.\n" {
		t.Errorf("stdout = %q", next.stdout)
	}
	req := h.srv.Requests()[1].Decoded
	if len(req.Messages) != 3 || !strings.Contains(req.Messages[0].Text(), "My name is Ada") || req.Messages[1].Text() != "Nice to meet you, Ada." {
		t.Errorf("the new run did not carry the conversation: %+v", req.Messages)
	}
	runs := h.runsByID()
	if len(runs) != 2 {
		t.Errorf("loom runs lists %d runs, want 2", len(runs))
	}
}

func TestRunsListing(t *testing.T) {
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		call("c1", "list_dir", `{}`), loomtest.Text("listed"),
		loomtest.Status(401, "", ""),
	}})
	ok := h.run("run", "list the files\nand more").want(t, 0)
	bad := h.run("run", "another task").want(t, 1)
	okID, badID := runIDFrom(t, ok.stderr), runIDFrom(t, bad.stderr)
	r := h.run("runs").want(t, 0)
	ls := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(ls) != 3 || !strings.HasPrefix(ls[0], "ID") || !strings.Contains(ls[0], "PROMPT") {
		t.Fatalf("loom runs printed:\n%s", r.stdout)
	}
	// Newest first; the 401 left the run resumable, so it is interrupted.
	for i, want := range [][]string{
		{badID, "interrupted", "0", "openai:test-model", "another task"},
		{okID, "done", "2", "openai:test-model", "list the files"},
	} {
		for _, w := range want {
			if !strings.Contains(ls[i+1], w) {
				t.Errorf("line %q lacks %q", ls[i+1], w)
			}
		}
	}
	if strings.Contains(r.stdout, "and more") {
		t.Error("loom runs shows more than the first line of the prompt")
	}
	js := h.runsByID()
	if js[okID]["turns"] != float64(2) || js[okID]["model"] != "openai:test-model" || js[okID]["status"] != "done" {
		t.Errorf("jsonl entry = %v", js[okID])
	}
	if lim := h.run("runs", "--limit", "1").want(t, 0); strings.Count(lim.stdout, "run_") != 1 {
		t.Errorf("--limit 1 printed:\n%s", lim.stdout)
	}
}

// TestStoreFlagAndDefault: runs go to --store, and without it to the
// default place under XDG_STATE_HOME.
func TestStoreFlagAndDefault(t *testing.T) {
	h := newHarness(t, loomtest.Config{Repeat: true, Turns: []loomtest.Turn{loomtest.Text("ok")}})
	h.run("run", "one").want(t, 0)
	if _, err := os.Stat(h.store); err != nil {
		t.Fatalf("--store %s was not written: %v", h.store, err)
	}
	// The harness adds --store; call the binary without it.
	def := h.runNoStore("run", "two").want(t, 0)
	path := filepath.Join(h.env["XDG_STATE_HOME"], "loom", "loom.db")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the default store %s was not written: %v\n%s", path, err, def)
	}
	if n := len(h.runsByID()); n != 1 {
		t.Errorf("the --store file holds %d runs, want 1", n)
	}
}

func (h *harness) runNoStore(args ...string) result {
	h.t.Helper()
	saved := h.store
	h.store = ""
	defer func() { h.store = saved }()
	return h.run(append([]string{args[0], "--store="}, args[1:]...)...)
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not appear", path)
}

func waitRequests(t *testing.T, srv *loomtest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if len(srv.Requests()) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the server did not get %d requests", n)
}

var _ = agent.InterruptedMaybe

// processesRunning returns the ids of the processes whose command line is
// cmdline (from /proc; none where there is no /proc).
func processesRunning(cmdline string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ") == cmdline {
			pids = append(pids, pid)
		}
	}
	return pids
}

func killProcesses(cmdline string) {
	for _, pid := range processesRunning(cmdline) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
