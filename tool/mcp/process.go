package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// process is one run of a stdio server. The child gets its own process
// group, so that closing the server also ends whatever it started.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // our end of the child's stdin
	stdout *os.File // our end of the child's stdout
	stderr *tail
	grace  time.Duration

	done       chan struct{} // closed once the child has exited and been reaped
	exitErr    error         // cmd.Wait's error, set before done is closed
	stderrDone chan struct{} // closed once the child's stderr is drained

	closeOnce sync.Once
}

// startProcess starts cfg's command with its stdin and stdout connected to
// pipes, and its stderr kept (the last few KiB) for error messages and
// copied to extra when that is not nil.
func startProcess(cfg ServerConfig, baseEnv []string, extra io.Writer, grace time.Duration) (*process, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Dir
	cmd.Env = environ(baseEnv, cfg.Env)
	setProcessGroup(cmd)

	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	// The child holds its ends now.
	inR.Close()
	outW.Close()
	errW.Close()

	p := &process{
		cmd:        cmd,
		stdin:      inW,
		stdout:     outR,
		stderr:     &tail{max: 4 << 10},
		grace:      grace,
		done:       make(chan struct{}),
		stderrDone: make(chan struct{}),
	}
	var w io.Writer = p.stderr
	if extra != nil {
		w = io.MultiWriter(p.stderr, extra)
	}
	go func() {
		io.Copy(w, errR)
		errR.Close()
		close(p.stderrDone)
	}()
	go func() {
		p.exitErr = cmd.Wait()
		// Whatever the server started dies with it; this also releases the
		// pipes those processes may hold, so that reads see EOF.
		killGroup(cmd)
		close(p.done)
	}()
	return p, nil
}

// environ returns base (os.Environ() when nil) with env applied, in a
// deterministic order.
func environ(base []string, env map[string]string) []string {
	if base == nil {
		base = os.Environ()
	}
	out := make([]string, 0, len(base)+len(env))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := env[k]; !over {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// pid returns the child's process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// terminate ends the child the way the MCP spec asks: close its stdin, wait,
// then SIGTERM, wait, then SIGKILL, each wait at most the grace period. The
// whole process group is signalled. It returns once the child is reaped.
func (p *process) terminate() {
	p.closeOnce.Do(func() {
		p.stdin.Close()
		if !p.wait(p.grace) {
			terminateGroup(p.cmd)
			if !p.wait(p.grace) {
				killGroup(p.cmd)
				<-p.done
			}
		}
		p.stdout.Close()
		// Whatever the group wrote to stderr is passed on before Close
		// returns; the pipe ends with the group, which is dead by now.
		t := time.NewTimer(p.grace)
		defer t.Stop()
		select {
		case <-p.stderrDone:
		case <-t.C:
		}
	})
}

// wait reports whether the child is reaped within d.
func (p *process) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// describe says how the child ended, with the end of what it wrote to
// stderr, waiting up to d for it to be reaped.
func (p *process) describe(d time.Duration) string {
	var b strings.Builder
	if p.wait(d) {
		var ee *exec.ExitError
		switch {
		case errors.As(p.exitErr, &ee) && ee.Exited():
			fmt.Fprintf(&b, "the process exited with status %d", ee.ExitCode())
		case errors.As(p.exitErr, &ee):
			fmt.Fprintf(&b, "the process ended (%s)", ee.ProcessState)
		case p.exitErr != nil:
			fmt.Fprintf(&b, "the process failed: %v", p.exitErr)
		default:
			b.WriteString("the process exited with status 0")
		}
	} else {
		b.WriteString("the connection closed while the process still runs")
	}
	if s := p.stderr.String(); s != "" {
		fmt.Fprintf(&b, "; its stderr ends with: %s", s)
	}
	return b.String()
}

// transport returns a go-sdk transport over the child's pipes. Closing the
// connection terminates the child.
func (p *process) transport() sdk.Transport {
	return &sdk.IOTransport{Reader: io.NopCloser(p.stdout), Writer: procWriter{p}}
}

// procWriter writes to the child's stdin; closing it terminates the child.
type procWriter struct{ p *process }

func (w procWriter) Write(b []byte) (int, error) { return w.p.stdin.Write(b) }
func (w procWriter) Close() error                { w.p.terminate(); return nil }

// processTransport starts the process when the go-sdk connects.
type processTransport struct {
	start func() (*process, error)
	got   *process
}

func (t *processTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	p, err := t.start()
	if err != nil {
		return nil, err
	}
	t.got = p
	return p.transport().Connect(ctx)
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// String returns the last 1000 bytes or so, as one line of valid UTF-8.
func (t *tail) String() string {
	t.mu.Lock()
	s := string(t.buf)
	t.mu.Unlock()
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " ")
	if len(s) > 1000 {
		cut := len(s) - 1000
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		s = "..." + s[cut:]
	}
	return s
}
