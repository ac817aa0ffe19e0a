// Package cli is the loom command: it parses the command line, wires a
// model adapter, the coding tools, MCP servers, the run store and an
// approver into an agent.Agent, and renders its runs.
//
// Main is the whole program; its exit status is part of loom's contract:
// 0 the run is done, 1 it failed, 2 a usage or configuration error (a message,
// never a stack trace), 130 interrupted by Ctrl-C after the run was
// checkpointed.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/loomkit/loom/internal/redact"
)

// Exit statuses.
const (
	ExitOK          = 0
	ExitFailed      = 1
	ExitUsage       = 2
	ExitInterrupted = 130
)

// Env is what the program runs with: its arguments (without the program
// name), standard streams and environment. Nil Getenv means os.Getenv.
type Env struct {
	Args   []string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Signals, when set, delivers interrupts instead of the process's
	// SIGINT and SIGTERM (for tests).
	Signals <-chan os.Signal
}

// usageError is a usage or configuration error: exit status 2.
type usageError struct {
	msg  string
	hint string // a second line: what to do
}

func (e *usageError) Error() string { return e.msg }

func usagef(hint, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), hint: hint}
}

// exitError carries an exit status out of a command whose failure was
// already reported (rendered by a Sink).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Main runs loom with env and returns the exit status.
func Main(env Env) (code int) {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	// Everything loom prints goes through writers that scrub its secrets.
	red := newRedactor(env.Getenv)
	out, errw := red.Writer(env.Stdout), red.Writer(env.Stderr)
	env.Stdout, env.Stderr = out, errw
	app := &app{env: env, red: red, flush: func() { out.Flush(); errw.Flush() }}
	defer app.flush()
	defer func() {
		// A bug must not leave a half-written terminal or a bare stack
		// trace for a configuration mistake; say what happened instead.
		if p := recover(); p != nil {
			fmt.Fprintf(env.Stderr, "loom: internal error: %v\nplease report this with the command you ran\n", p)
			code = ExitFailed
		}
	}()
	err := app.main(env.Args)
	return app.exit(err)
}

type app struct {
	env   Env
	red   *redact.Redactor // scrubs the credentials loom was given from what leaves it
	flush func()           // writes what the scrubbing writers hold back
}

func (a *app) exit(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(a.env.Stderr, "loom: %s\n", ue.msg)
		if ue.hint != "" {
			fmt.Fprintf(a.env.Stderr, "%s\n", ue.hint)
		}
		return ExitUsage
	}
	fmt.Fprintf(a.env.Stderr, "loom: %v\n", err)
	return ExitFailed
}

func (a *app) main(args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return a.interactiveCmd(args)
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return a.runCmd(rest)
	case "resume":
		return a.resumeCmd(rest)
	case "runs":
		return a.runsCmd(rest)
	case "demo":
		return a.demoCmd(rest)
	case "mcp":
		return a.mcpCmd(rest)
	case "worker":
		return a.workerCmd(rest)
	case "approve":
		return a.approveCmd(rest)
	case "version":
		return a.versionCmd(rest)
	case "help":
		return a.helpCmd(rest)
	}
	return usagef("Run 'loom help' for the commands.", "unknown command %q", cmd)
}

// signals returns a context cancelled (with cause ui.ErrInterrupted) at
// the first SIGINT or SIGTERM, and a function to call when done. At the
// second signal the process exits at once with status 130: the journal
// is consistent after every append, so nothing is corrupted, though a
// tool's result may not be recorded.
func (a *app) signals(parent context.Context, onFirst func()) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := a.env.Signals
	var own chan os.Signal
	if ch == nil {
		own = make(chan os.Signal, 2)
		signal.Notify(own, os.Interrupt, syscall.SIGTERM)
		ch = own
	}
	done := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case <-done:
				return
			case <-ch:
				n++
				if n == 1 {
					if onFirst != nil {
						onFirst()
					}
					cancel(errInterrupted)
					continue
				}
				fmt.Fprintln(a.env.Stderr, "\nloom: interrupted twice; exiting now")
				a.flush()
				os.Exit(ExitInterrupted)
			}
		}
	}()
	return ctx, func() {
		close(done)
		if own != nil {
			signal.Stop(own)
		}
		cancel(nil)
	}
}
