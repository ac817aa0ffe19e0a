package shell

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// markerVar is set, with a value unique to the call, in the environment of
// every command; processes that carry it are killed when the command ends,
// even those that left its process group (setsid, double-forked daemons).
const markerVar = "LOOM_SHELL_CALL"

// runSpec is how one command runs.
type runSpec struct {
	shell      string        // the bash binary
	dir        string        // working directory
	env        []string      // the full environment
	timeout    time.Duration // > 0
	keep       int           // bytes of output kept, head and tail
	killOutput int64         // the command is killed after printing this much
	sandbox    *sandboxPlan  // nil: unconfined
}

// outcome is what happened to a command.
type outcome struct {
	output      string // head and tail, valid UTF-8
	total       int64  // bytes printed
	exitCode    int    // -1 when killed by a signal
	signal      string // the signal that ended bash, if any
	timedOut    bool
	canceled    bool
	outputLimit bool
	elapsed     time.Duration
}

// errStart is returned when the command could not be started at all.
type errStart struct{ err error }

func (e *errStart) Error() string { return "could not start bash: " + e.err.Error() }
func (e *errStart) Unwrap() error { return e.err }

// drainGrace is how long output is still read once bash and its process
// group are gone, for a process that escaped both and holds the pipe.
const drainGrace = time.Second

// runCommand runs command with bash -c in its own process group, with
// standard input from /dev/null and standard output and error merged into
// one pipe. When bash ends, times out, prints too much, or ctx is done, the
// whole process group is killed, and so is every process that still
// carries the call's marker in its environment.
func runCommand(ctx context.Context, command string, spec runSpec) (outcome, error) {
	began := time.Now()
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	marker := hex.EncodeToString(id)

	pr, pw, err := os.Pipe()
	if err != nil {
		return outcome{}, &errStart{err}
	}
	cmd := exec.Command(spec.shell, "-c", command)
	cmd.Dir = spec.dir
	cmd.Env = setEnv(spec.env, markerVar, marker)
	cmd.Stdin = nil // the null device
	cmd.Stdout = pw
	cmd.Stderr = pw
	setProcessGroup(cmd)
	start := cmd.Start
	if spec.sandbox != nil {
		start = func() error { return startConfined(cmd, spec.sandbox) }
	}
	if err := start(); err != nil {
		pr.Close()
		pw.Close()
		var se *SandboxError
		if errors.As(err, &se) {
			return outcome{}, se
		}
		return outcome{}, &errStart{err}
	}
	pw.Close() // the children hold the only write ends now

	out := newHeadTail(spec.keep)
	tooMuch := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		buf := make([]byte, 32<<10)
		signalled := false
		for {
			n, err := pr.Read(buf)
			out.Write(buf[:n])
			if !signalled && spec.killOutput > 0 && out.Total() > spec.killOutput {
				signalled = true
				close(tooMuch)
			}
			if err != nil {
				return
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	timer := time.NewTimer(spec.timeout)
	defer timer.Stop()
	var o outcome
	var werr error
	select {
	case werr = <-exited:
	case <-timer.C:
		o.timedOut = true
	case <-ctx.Done():
		o.canceled = true
	case <-tooMuch:
		o.outputLimit = true
	}
	killGroup(cmd)
	if o.timedOut || o.canceled || o.outputLimit {
		werr = <-exited
	}
	// bash is gone: kill what it left behind.
	killGroup(cmd)
	killMarked(marker)

	select {
	case <-drained:
	case <-time.After(drainGrace):
		_ = pr.SetReadDeadline(time.Now())
		<-drained
	}
	pr.Close()

	o.output = out.String()
	o.total = out.Total()
	o.elapsed = time.Since(began)
	o.exitCode = cmd.ProcessState.ExitCode()
	o.signal = exitSignal(cmd.ProcessState)
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return o, fmt.Errorf("waiting for bash: %w", werr)
	}
	return o, nil
}
