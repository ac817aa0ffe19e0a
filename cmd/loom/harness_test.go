package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomkit/loom/loomtest"
)

// The end-to-end tests run the loom binary, built once per test run, as a
// user would: against loomtest over loopback, in a temporary workspace,
// with a temporary store and home directory.

var (
	loomBin   string
	raceBuild bool // the test binary was built with -race; so is loom
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loom-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	loomBin = filepath.Join(dir, "loom")
	args := []string{"build", "-o", loomBin}
	if raceBuild {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building loom:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// harness is one user's machine: a workspace, a home, a store, and a fake
// model server.
type harness struct {
	t     *testing.T
	ws    string // the workspace (and the directory loom runs in)
	home  string
	store string
	srv   *loomtest.Server
	env   map[string]string
}

func newHarness(t *testing.T, cfg loomtest.Config) *harness {
	t.Helper()
	root := t.TempDir()
	h := &harness{
		t:     t,
		ws:    filepath.Join(root, "ws"),
		home:  filepath.Join(root, "home"),
		store: filepath.Join(root, "state", "runs.db"),
	}
	for _, d := range []string{h.ws, h.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.srv = loomtest.Start(cfg)
	t.Cleanup(h.srv.Close)
	h.env = map[string]string{
		"PATH":            os.Getenv("PATH"),
		"HOME":            h.home,
		"XDG_STATE_HOME":  filepath.Join(root, "xdg-state"),
		"TMPDIR":          os.TempDir(),
		"LOOM_MODEL":      "openai:test-model",
		"OPENAI_API_KEY":  "sk-test",
		"OPENAI_BASE_URL": h.srv.OpenAIURL(),
	}
	return h
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// command returns loom with args, in the workspace, with the harness's
// environment, the store flag added to the commands that take it.
func (h *harness) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, loomBin, h.withStore(args)...)
	cmd.Dir = h.ws
	for k, v := range h.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func (h *harness) withStore(args []string) []string {
	if len(args) == 0 {
		return args
	}
	switch args[0] {
	case "run", "resume", "runs":
		for _, a := range args {
			if a == "--store" || strings.HasPrefix(a, "--store=") || a == "--temporal" {
				return args
			}
		}
		return append([]string{args[0], "--store", h.store}, args[1:]...)
	}
	return args
}

// run runs loom to its end (at most a minute) with stdin.
func (h *harness) runIn(stdin string, args ...string) result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := h.command(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		h.t.Fatalf("loom %v: %v\n%s", args, err, r)
	}
	if ctx.Err() != nil {
		h.t.Fatalf("loom %v did not end within a minute\n%s", args, r)
	}
	return r
}

func (h *harness) run(args ...string) result {
	h.t.Helper()
	return h.runIn("", args...)
}

// want checks the exit status.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\n%s", r.code, code, r)
	}
	return r
}

// noStackTrace checks that loom did not panic or print a Go stack trace.
func (r result) noStackTrace(t *testing.T) result {
	t.Helper()
	for _, s := range []string{"goroutine ", "panic:", ".go:"} {
		if strings.Contains(r.stderr, s) {
			t.Fatalf("stderr looks like a stack trace (has %q)\n%s", s, r)
		}
	}
	return r
}

// lines decodes JSON Lines output.
func lines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var ls []map[string]any
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line is not one JSON object: %v\n%s", err, l)
		}
		ls = append(ls, m)
	}
	return ls
}

func ofType(ls []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, l := range ls {
		if l["type"] == typ {
			out = append(out, l)
		}
	}
	return out
}

// writeFile writes a file in the workspace.
func (h *harness) writeFile(name, content string) {
	h.t.Helper()
	p := filepath.Join(h.ws, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// requestText is everything the model server was sent in request i
// (0-based): system prompt and messages, as decoded JSON text.
func (h *harness) requestText(i int) string {
	h.t.Helper()
	reqs := h.srv.Requests()
	if i >= len(reqs) {
		h.t.Fatalf("the server got %d requests, want at least %d", len(reqs), i+1)
	}
	b, _ := json.Marshal(reqs[i].Decoded)
	return string(b)
}

// background runs loom without waiting; the output is collected.
type running struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	errb bytes.Buffer
	done chan struct{}
	err  error
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (h *harness) start(args ...string) *running {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	h.t.Cleanup(cancel)
	r := &running{done: make(chan struct{})}
	r.cmd = h.command(ctx, args...)
	r.cmd.Stdout = lockedWriter{&r.mu, &r.out}
	r.cmd.Stderr = lockedWriter{&r.mu, &r.errb}
	if err := r.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	h.t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.done
	})
	return r
}

func (r *running) output() (string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String(), r.errb.String()
}

// waitFor waits until cond holds of the output so far.
func (r *running) waitFor(t *testing.T, what string, cond func(stdout, stderr string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond(r.output()) {
			return
		}
		select {
		case <-r.done:
			if cond(r.output()) {
				return
			}
			o, e := r.output()
			t.Fatalf("loom ended before %s\n--- stdout\n%s\n--- stderr\n%s", what, o, e)
		case <-time.After(20 * time.Millisecond):
		}
	}
	o, e := r.output()
	t.Fatalf("timed out waiting for %s\n--- stdout\n%s\n--- stderr\n%s", what, o, e)
}

// wait waits for loom to end and returns its result.
func (r *running) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatal("loom did not end within a minute")
	}
	o, e := r.output()
	res := result{stdout: o, stderr: e}
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		res.code = ee.ExitCode()
	} else if r.err != nil {
		t.Fatal(r.err)
	}
	return res
}

var _ = io.Discard
