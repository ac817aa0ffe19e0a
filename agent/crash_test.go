//go:build unix

package agent_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/store/sqlite"
)

// The crash harness re-executes the test binary as a child that drives
// the harness run against a SQLite store and is killed with SIGKILL: at
// every step boundary (after each journal record is committed; the child
// kills itself there) and in the middle of a destructive tool (after its
// effect, before it returns; the parent kills it). The parent then opens
// the database and resumes the run. The final transcript must be valid,
// equal to the uninterrupted run's but for calls reported interrupted,
// and no destructive call may take effect twice.

const crashChildEnv = "LOOM_AGENT_CRASH_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(crashChildEnv); role != "" {
		os.Exit(crashChild(role))
	}
	os.Exit(m.Run())
}

// Exit codes of a child.
const (
	childOK      = 0
	childFailed  = 1
	childClaimed = 3
)

func crashChild(role string) int {
	db, counter := os.Getenv("LOOM_DB"), os.Getenv("LOOM_COUNTER")
	killAfter, _ := strconv.Atoi(os.Getenv("LOOM_KILL_AFTER"))
	ttl, _ := time.ParseDuration(os.Getenv("LOOM_TTL"))
	s, err := sqlite.Open(db, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		return childFailed
	}
	defer s.Close()
	st := &countingStore{Store: s}
	if killAfter > 0 {
		st.onAppend = func(n int) {
			if n == killAfter {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}
	}
	a := harnessAgent(st, harnessModel(os.Getenv("LOOM_GATE")), counter, os.Getenv("LOOM_HANG_IN"), os.Getenv("LOOM_OWNER"), ttl)
	switch role {
	case "run":
		_, err = a.Run(context.Background(), agent.Prompt("go"))
	case "resume":
		_, err = a.Resume(context.Background(), agent.Resumption{RunID: harnessRunID})
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if errors.Is(err, store.ErrClaimed) {
		fmt.Println("CLAIMED")
		return childClaimed
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return childFailed
	}
	fmt.Println("DONE")
	return childOK
}

type child struct {
	cmd   *exec.Cmd
	lines chan string
}

func startChild(t *testing.T, role string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{crashChildEnv + "=" + role}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return c
}

// wait waits for the child's exit, at most a minute.
func (c *child) wait(t *testing.T) (code int, killed bool) {
	t.Helper()
	for range c.lines { // drain; the pipe closes when the child exits
	}
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		c.cmd.Process.Kill()
		t.Fatal("child did not exit within a minute")
	}
	ws := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ws.ExitStatus(), ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// waitLine waits for the child to print line.
func (c *child) waitLine(t *testing.T, line string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited without printing %q", line)
			}
			if l == line {
				return
			}
		case <-timeout:
			t.Fatalf("child did not print %q within a minute", line)
		}
	}
}

func crashEnv(dir string, extra ...string) []string {
	return append([]string{
		"LOOM_DB=" + filepath.Join(dir, "loom.db"),
		"LOOM_COUNTER=" + filepath.Join(dir, "counter"),
		"LOOM_OWNER=worker",
		"LOOM_TTL=1m",
	}, extra...)
}

// resumeInParent opens the database the child left (it must open
// cleanly) and resumes the run to its end.
func resumeInParent(t *testing.T, dir, owner string) agent.Result {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(dir, "loom.db"), nil)
	if err != nil {
		t.Fatalf("the database does not open after the kill: %v", err)
	}
	defer s.Close()
	if _, err := s.Load(context.Background(), harnessRunID, 0); err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the journal does not load after the kill: %v", err)
	}
	res, err := harnessAgent(s, harnessModel(""), filepath.Join(dir, "counter"), "", owner, time.Minute).Resume(context.Background(), agent.Resumption{RunID: harnessRunID})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestCrashAtEveryStepBoundary(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process per step: skipped with -short")
	}
	want, total := reference(t)
	for k := 1; k < total; k++ {
		t.Run(fmt.Sprint("after_record_", k), func(t *testing.T) {
			dir := t.TempDir()
			c := startChild(t, "run", crashEnv(dir, fmt.Sprint("LOOM_KILL_AFTER=", k))...)
			if code, killed := c.wait(t); !killed {
				t.Fatalf("child exited with %d instead of being killed", code)
			}
			res := resumeInParent(t, dir, "worker")
			checkEffects(t, filepath.Join(dir, "counter"), checkTranscript(t, res.Messages, want))
		})
	}
}

func TestCrashInTheMiddleOfATool(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes: skipped with -short")
	}
	want, _ := reference(t)
	for _, text := range []string{"x", "y"} { // the destructive calls of rounds 1 and 2
		t.Run(text, func(t *testing.T) {
			dir := t.TempDir()
			c := startChild(t, "run", crashEnv(dir, "LOOM_HANG_IN="+text)...)
			c.waitLine(t, "IN_TOOL")
			c.cmd.Process.Signal(syscall.SIGKILL)
			if _, killed := c.wait(t); !killed {
				t.Fatal("child was not killed")
			}
			res := resumeInParent(t, dir, "worker")
			interrupted := checkTranscript(t, res.Messages, want)
			id := map[string]string{"x": "c2", "y": "c3"}[text]
			if len(interrupted) != 1 || interrupted[0] != id {
				t.Fatalf("interrupted %v, want [%s]", interrupted, id)
			}
			counter := filepath.Join(dir, "counter")
			checkEffects(t, counter, interrupted)
			if n := effects(t, counter)[fmt.Sprintf("%s/%s/%s", harnessRunID, map[string]string{"x": "1", "y": "2"}[text], id)]; n != 1 {
				t.Fatalf("the interrupted call took effect %d times, want exactly 1 (before the kill)", n)
			}
		})
	}
}

// Two processes resume the same interrupted run: exactly one proceeds,
// the other gets a clear error.
func TestTwoProcessesResumeOneRun(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes: skipped with -short")
	}
	dir := t.TempDir()
	c := startChild(t, "run", crashEnv(dir, "LOOM_KILL_AFTER=7", "LOOM_TTL=300ms")...)
	if _, killed := c.wait(t); !killed {
		t.Fatal("child was not killed")
	}
	time.Sleep(400 * time.Millisecond) // the dead worker's claim lapses
	gate := filepath.Join(dir, "gate")
	r1 := startChild(t, "resume", crashEnv(dir, "LOOM_OWNER=resumer-1", "LOOM_GATE="+gate)...)
	r2 := startChild(t, "resume", crashEnv(dir, "LOOM_OWNER=resumer-2", "LOOM_GATE="+gate)...)
	// Whoever claimed first waits at the gate; the other must give up.
	lost := make(chan int, 2)
	for i, r := range []*child{r1, r2} {
		go func() {
			for l := range r.lines {
				if l == "CLAIMED" {
					lost <- i
				}
			}
		}()
	}
	var loser int
	select {
	case loser = <-lost:
	case <-time.After(time.Minute):
		t.Fatal("neither resumer reported the run claimed")
	}
	writeFile(t, gate)
	codes := [2]int{}
	for i, r := range []*child{r1, r2} {
		codes[i], _ = r.wait(t)
	}
	if codes[loser] != childClaimed || codes[1-loser] != childOK {
		t.Fatalf("exit codes %v (loser %d), want one %d and one %d", codes, loser, childOK, childClaimed)
	}
	want, _ := reference(t)
	res := resumeInParent(t, dir, "checker") // finished: returns the result again
	checkEffects(t, filepath.Join(dir, "counter"), checkTranscript(t, res.Messages, want))
}
