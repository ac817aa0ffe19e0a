package shell

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

// Defaults of [Config].
const (
	DefaultTimeout    = 2 * time.Minute
	DefaultMaxTimeout = 10 * time.Minute
	// DefaultMaxOutput is how much output is kept, head and tail: below
	// [tool.DefaultMaxResult], so the result is not cut twice.
	DefaultMaxOutput = 24_000
	// DefaultKillOutput is how much output a command may print before it
	// is killed (yes, an endless log).
	DefaultKillOutput = 64 << 20
)

// Config configures the bash tool. The zero value runs commands in the
// current directory under the default [Policy] and limits.
type Config struct {
	// Dir is the workspace the commands run in; "" is the current
	// directory of the process when a command starts.
	Dir string
	// Policy judges each command; nil is the default policy.
	Policy *Policy
	// Timeout is a command's time limit when the call does not give one
	// (default [DefaultTimeout]); MaxTimeout caps what a call may ask for
	// (default [DefaultMaxTimeout]).
	Timeout, MaxTimeout time.Duration
	// MaxOutput is how many bytes of output are kept, half from the start
	// and half from the end (default [DefaultMaxOutput]).
	MaxOutput int
	// KillOutput is how many bytes a command may print before it is killed
	// (default [DefaultKillOutput]; negative: no limit but the timeout).
	KillOutput int64
	// Env is the environment commands start from, before credentials are
	// removed (see [ScrubEnv]); nil is the environment of the process.
	Env []string
	// KeepEnv names variables passed on even though they look like
	// credentials (say, SSH_AUTH_SOCK for git push over SSH).
	KeepEnv []string
	// Shell is the bash binary (default "bash", found in PATH).
	Shell string
	// Sandbox confines each command with the operating system (see
	// [Sandbox]); nil runs commands with the process's full rights, under
	// the policy alone.
	Sandbox *Sandbox
}

// Args are the arguments of the bash tool.
type Args struct {
	Command   string `json:"command" jsonschema:"the bash command to run, in the workspace directory"`
	TimeoutMS int    `json:"timeout_ms,omitempty" jsonschema:"time limit in milliseconds; the command and every process it started are killed when it is reached"`
}

// Tool is the bash tool: it implements [tool.Tool] and [tool.Approvable].
// It is safe for concurrent use.
type Tool struct {
	*tool.FuncTool[Args, string]
	cfg    Config
	policy *Policy
	runs   atomic.Int64 // commands started, for tests
}

// New returns the bash tool configured by cfg (nil for the defaults).
//
// A call's command is judged by the policy first. [Deny]: the call is
// refused with an error result saying why, before anything runs, whether
// or not it was approved. [Ask]: the call needs approval
// ([tool.NeedsApproval] says so). [Allow]: it needs none.
//
// The command runs as bash -c in the workspace, with standard input from
// /dev/null, standard output and error merged, and an environment without
// credentials. It runs in its own process group; when it ends, times out,
// prints more than KillOutput, or its context is done, the group is killed
// with SIGKILL, and so is every process that inherited the call's marker
// variable (LOOM_SHELL_CALL) but left the group (setsid, daemons). The
// result is the output (head and tail when long) followed by the exit
// code; a non-zero exit, a timeout or a kill is an error result.
func New(cfg *Config) *Tool {
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	c.Timeout = min(c.Timeout, c.MaxTimeout)
	if c.MaxOutput <= 0 {
		c.MaxOutput = DefaultMaxOutput
	}
	if c.KillOutput == 0 {
		c.KillOutput = DefaultKillOutput
	}
	if c.Shell == "" {
		c.Shell = "bash"
	}
	t := &Tool{cfg: c, policy: c.Policy}
	if t.policy == nil {
		t.policy = &Policy{}
	}
	schema, err := jsonschema.For[Args](nil)
	if err != nil {
		panic(fmt.Sprintf("shell: inferring the schema of Args: %v", err)) // a bug in Args
	}
	one, maxMS := 1, float64(c.MaxTimeout.Milliseconds())
	schema.Properties["command"].MinLength = &one
	schema.Properties["timeout_ms"].Minimum = jsonschema.Ptr(0.0)
	schema.Properties["timeout_ms"].Maximum = &maxMS
	t.FuncTool = tool.Func("bash", t.description(), t.call, &tool.FuncOptions[Args]{
		Effect: llm.EffectDestructive,
		// The policy decides per call: read-only commands need no
		// approval, the others do (denied ones are refused anyway).
		ApprovalFor: func(a Args) bool { return t.policy.Classify(a.Command).Decision != Allow },
		MaxResult:   c.MaxOutput + 1000,
		Schema:      schema,
	})
	return t
}

func (t *Tool) description() string {
	return fmt.Sprintf("Run a bash command in the workspace directory and return its output "+
		"(standard output and error together) and exit code. Standard input is empty: a command "+
		"waiting for input gets end-of-file. The command runs for at most timeout_ms "+
		"(default %v, at most %v); then it and every process it started are killed, so do not "+
		"start servers or background jobs expecting them to stay. Long output is cut to its "+
		"start and end. Read-only commands run at once; others may wait for the user's approval; "+
		"destructive ones (rm -rf /, sudo, curl | sh, writing to devices or system files) are refused.",
		t.cfg.Timeout, t.cfg.MaxTimeout) + t.sandboxNote()
}

// sandboxNote tells the model what the sandbox blocks, when there is one.
func (t *Tool) sandboxNote() string {
	s := t.cfg.Sandbox
	if s == nil {
		return ""
	}
	if _, ok := SandboxLevel(); !ok {
		return ""
	}
	net := " and cannot open network connections"
	if s.Network || landlockABI() < 4 {
		net = ""
	}
	return " Commands run in a sandbox: they can change files only in the workspace and the " +
		"temporary directory, cannot read credential files (~/.ssh, cloud logins)" + net +
		"; \"Permission denied\" there comes from the sandbox, and approval does not lift it."
}

// Classify returns the policy's verdict on command, for showing to the
// person asked to approve it.
func (t *Tool) Classify(command string) Verdict { return t.policy.Classify(command) }

// RefusedError is the error of a call whose command the policy denies.
type RefusedError struct{ Verdict Verdict }

func (e *RefusedError) Error() string {
	part := ""
	if e.Verdict.Part != "" {
		part = fmt.Sprintf(" (%s)", e.Verdict.Part)
	}
	return fmt.Sprintf("Refused: this command%s %s. It was not run, and it will not be run even if approved. "+
		"Do it another way, or ask the user to run it themselves.", part, e.Verdict.Reason)
}

// ExitError is the error of a command that exited non-zero, timed out or
// was killed; Output is what it printed.
type ExitError struct {
	Output   string
	ExitCode int
	// Why is "", "timed out", "canceled" or "printed too much".
	Why string
}

func (e *ExitError) Error() string { return e.Output }

func (t *Tool) call(ctx context.Context, a Args) (string, error) {
	if strings.TrimSpace(a.Command) == "" {
		return "", errors.New("the command is empty: give a bash command to run")
	}
	if v := t.policy.Classify(a.Command); v.Decision == Deny {
		return "", &RefusedError{Verdict: v}
	}
	timeout := t.cfg.Timeout
	if a.TimeoutMS > 0 {
		timeout = min(time.Duration(a.TimeoutMS)*time.Millisecond, t.cfg.MaxTimeout)
	}
	env := t.cfg.Env
	if env == nil {
		env = os.Environ()
	}
	env = ScrubEnv(env, t.cfg.KeepEnv)
	env = setEnv(env, "GIT_TERMINAL_PROMPT", "0")
	env = setEnv(env, "PAGER", "cat")
	env = setEnv(env, "GIT_PAGER", "cat")
	shell, err := exec.LookPath(t.cfg.Shell)
	if err != nil {
		return "", fmt.Errorf("bash was not found (%v): this tool needs bash installed", err)
	}
	var box *sandboxPlan
	if t.cfg.Sandbox != nil {
		if box, err = t.cfg.Sandbox.plan(t.cfg.Dir); err != nil {
			return "", err
		}
	}
	t.runs.Add(1)
	o, err := runCommand(ctx, a.Command, runSpec{
		sandbox:    box,
		shell:      shell,
		dir:        t.cfg.Dir,
		env:        env,
		timeout:    timeout,
		keep:       t.cfg.MaxOutput,
		killOutput: t.cfg.KillOutput,
	})
	if err != nil {
		return "", err
	}
	return report(o, timeout, t.cfg.KillOutput)
}

// report turns an outcome into the result's text: the output, then a line
// with the exit status.
func report(o outcome, timeout time.Duration, killOutput int64) (string, error) {
	var b strings.Builder
	b.WriteString(o.output)
	if o.output != "" && !strings.HasSuffix(o.output, "\n") {
		b.WriteByte('\n')
	}
	if o.total == 0 {
		b.WriteString("(no output)\n")
	}
	why := ""
	switch {
	case o.timedOut:
		why = "timed out"
		fmt.Fprintf(&b, "[timed out after %v: the command and every process it started were killed]", timeout)
	case o.canceled:
		why = "canceled"
		b.WriteString("[canceled: the command and every process it started were killed]")
	case o.outputLimit:
		why = "printed too much"
		fmt.Fprintf(&b, "[killed after printing more than %d bytes]", killOutput)
	case o.signal != "":
		fmt.Fprintf(&b, "[killed by signal: %s]", o.signal)
	default:
		fmt.Fprintf(&b, "[exit code %d]", o.exitCode)
	}
	if why != "" || o.exitCode != 0 {
		return "", &ExitError{Output: b.String(), ExitCode: o.exitCode, Why: why}
	}
	return b.String(), nil
}
