//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
)

// terminal is loom running on a pseudo-terminal, as a person runs it.
type terminal struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	seen int // how much of out expect has consumed
	done chan struct{}
}

func (h *harness) startTerminal(extraEnv map[string]string, args ...string) *terminal {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	h.t.Cleanup(cancel)
	cmd := h.command(ctx, args...)
	cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	for k, v := range extraEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		h.t.Skip("no pseudo-terminal here:", err)
	}
	term := &terminal{t: h.t, cmd: cmd, tty: tty, done: make(chan struct{})}
	go func() {
		io.Copy(lockedWriter{&term.mu, &term.out}, tty)
		close(term.done)
	}()
	h.t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		tty.Close()
	})
	return term
}

func (term *terminal) output() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// expect waits for s to appear after what earlier expects consumed.
func (term *terminal) expect(s string) {
	term.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out := term.output()
		if i := strings.Index(out[term.seen:], s); i >= 0 {
			term.seen += i + len(s)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	term.t.Fatalf("the terminal never showed %q; it shows:\n%s", s, term.output()[term.seen:])
}

func (term *terminal) send(s string) {
	term.t.Helper()
	if _, err := term.tty.Write([]byte(s)); err != nil {
		term.t.Fatal(err)
	}
}

func (term *terminal) wait() int {
	term.t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- term.cmd.Wait() }()
	select {
	case err := <-errc:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			term.t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		term.t.Fatalf("loom did not exit; the terminal shows:\n%s", term.output())
	}
	return -1
}

var colour = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// TestInteractiveSession drives loom with no arguments on a terminal:
// requests in one conversation, the approval prompt's four answers,
// Ctrl-C stopping a turn, and Ctrl-D leaving.
func TestInteractiveSession(t *testing.T) {
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		bash("c1", "touch approved.txt"), loomtest.Text("Made approved.txt."),
		bash("c2", "touch denied.txt"), loomtest.Text("Understood, I did not."),
		bash("c3", "touch always1.txt"), bash("c4", "touch always2.txt"), loomtest.Text("Made both."),
		{Parts: []llm.Part{llm.Text{Text: "never"}}, HeaderDelay: 30 * time.Second},
		loomtest.Text("Back after the interruption."),
	}})
	term := h.startTerminal(nil, "--store", h.store)
	term.expect("loom · openai:test-model")
	term.expect("›")

	// yes
	term.send("make approved.txt\r")
	term.expect("bash wants to run")
	term.expect("touch approved.txt")
	term.expect("yes · ")
	term.send("y\r")
	term.expect("Made approved.txt.")
	term.expect("›")
	if _, err := os.Stat(filepath.Join(h.ws, "approved.txt")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}

	// no, with a reason the model reads
	term.send("make denied.txt\r")
	term.expect("yes · ")
	term.send("no, not in this directory\r")
	term.expect("Understood, I did not.")
	term.expect("›")
	if _, err := os.Stat(filepath.Join(h.ws, "denied.txt")); err == nil {
		t.Error("the denied command ran")
	}
	if got := h.requestText(3); !strings.Contains(got, "the user said no: not in this directory") {
		t.Errorf("the model was not told the reason:\n%s", got)
	}
	// The conversation goes on: the second request's history has the first.
	if got := h.requestText(2); !strings.Contains(got, "make approved.txt") || !strings.Contains(got, "Made approved.txt.") {
		t.Errorf("the session did not keep the conversation:\n%s", got)
	}

	// always: the second call of the tool is not asked about
	term.send("make two files\r")
	term.expect("always allow bash")
	term.send("a\r")
	term.expect("Made both.")
	term.expect("›")
	if strings.Count(term.output(), "bash wants to run") != 3 {
		t.Errorf("asked %d times, want 3 (always allows the rest)", strings.Count(term.output(), "bash wants to run"))
	}
	for _, f := range []string{"always1.txt", "always2.txt"} {
		if _, err := os.Stat(filepath.Join(h.ws, f)); err != nil {
			t.Errorf("%s was not made", f)
		}
	}

	// Ctrl-C stops the turn; the session and the conversation go on.
	term.send("slow request\r")
	waitRequests(t, h.srv, 8)
	term.send("\x03")
	term.expect("interrupted")
	term.expect("›")
	term.send("and now?\r")
	term.expect("Back after the interruption.")
	term.expect("›")
	if got := h.requestText(8); !strings.Contains(got, "slow request") || !strings.Contains(got, "and now?") {
		t.Errorf("the request after Ctrl-C lost the interrupted turn:\n%s", got)
	}
	if !colour.MatchString(term.output()) {
		t.Error("no colours on a terminal")
	}

	term.send("\x04") // Ctrl-D
	if code := term.wait(); code != 0 {
		t.Errorf("exit status %d after Ctrl-D, want 0\n%s", code, term.output())
	}
	// Every request of the session was a checkpointed run.
	if n := len(h.runsByID()); n != 5 {
		t.Errorf("loom runs lists %d runs, want 5", n)
	}
}

func TestInteractiveCtrlCTwiceLeaves(t *testing.T) {
	h := newHarness(t, loomtest.Config{})
	term := h.startTerminal(map[string]string{"NO_COLOR": "1"})
	term.expect("›")
	term.send("\x03")
	term.expect("Ctrl-C again to leave")
	term.send("\x03")
	if code := term.wait(); code != 130 {
		t.Errorf("exit status %d, want 130", code)
	}
	if colour.MatchString(term.output()) {
		t.Errorf("colours despite NO_COLOR: %q", term.output())
	}
}

// TestRunOnTerminal: loom run on a terminal shows a spinner and colours,
// unless NO_COLOR is set; Ctrl-C (from the terminal) exits with 130.
func TestRunOnTerminal(t *testing.T) {
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		{Parts: []llm.Part{llm.Text{Text: "done waiting"}}, HeaderDelay: 500 * time.Millisecond},
		{Parts: []llm.Part{llm.Text{Text: "never"}}, HeaderDelay: 30 * time.Second},
		loomtest.Text("plain"),
	}})
	term := h.startTerminal(nil, "run", "wait for it")
	term.expect("waiting for openai:test-model")
	term.expect("done waiting")
	if code := term.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !colour.MatchString(term.output()) {
		t.Error("no colours on a terminal")
	}

	term = h.startTerminal(nil, "run", "slow")
	term.expect("run_")
	waitRequests(t, h.srv, 2)
	term.send("\x03")
	term.expect("loom resume run_")
	if code := term.wait(); code != 130 {
		t.Errorf("exit status %d after Ctrl-C, want 130", code)
	}

	term = h.startTerminal(map[string]string{"NO_COLOR": "1"}, "run", "plain please")
	term.expect("plain")
	term.wait()
	if colour.MatchString(term.output()) {
		t.Errorf("colours despite NO_COLOR: %q", term.output())
	}
}

// TestInteractivePiped: --interactive reads requests from a pipe, and
// approval answers too.
func TestInteractivePiped(t *testing.T) {
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		loomtest.Text("First answer."),
		bash("c1", "touch piped.txt"),
		loomtest.Text("Second answer."),
	}})
	r := h.runIn("first\nsecond \\\nline\ny\n/exit\n", "--interactive").want(t, 0)
	if r.stdout != "First answer.\nSecond answer.\n" {
		t.Errorf("stdout = %q\n%s", r.stdout, r)
	}
	if got := h.srv.Requests()[1].Decoded.Messages; len(got) != 3 || got[2].Text() != "second \nline" {
		t.Errorf("the second request's messages = %+v", got)
	}
	if _, err := os.Stat(filepath.Join(h.ws, "piped.txt")); err != nil {
		t.Error("the approved command did not run")
	}
}
