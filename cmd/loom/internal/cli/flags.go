package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/loomkit/loom/tool/shell"
)

// options are the flags of the commands that run the agent (loom run,
// loom resume and the interactive session).
type options struct {
	model       string
	baseURL     string
	workspace   string
	maxTurns    int
	yes         bool
	output      string
	noStream    bool
	storePath   string
	blobs       string // loom worker --blobs
	system      string
	mcp         []string
	interactive bool
	graceful    bool // the last allowed model call is tool-free (interactive sessions)
	temporal    string
	queue       string
	sandbox     string   // auto, require or off
	network     bool     // sandboxed commands may use the network
	writable    []string // more directories sandboxed commands may change

	set map[string]bool // flags given on the command line
}

// DefaultMaxTurns is loom's turn budget when --max-turns is not given:
// enough for a real coding task, small enough to stop a model that loops.
const DefaultMaxTurns = 50

type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ", ") }
func (m *multiFlag) Set(v string) error {
	*m = append(*m, v)
	return nil
}

// turnsFlag is --max-turns: a whole number of at least 1.
type turnsFlag int

func (t *turnsFlag) String() string { return strconv.Itoa(int(*t)) }
func (t *turnsFlag) Set(v string) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		return fmt.Errorf("%q is not a number of turns: give a whole number of at least 1", v)
	}
	*t = turnsFlag(n)
	return nil
}

// outputFlag is --output: text or jsonl.
type outputFlag string

func (o *outputFlag) String() string { return string(*o) }
func (o *outputFlag) Set(v string) error {
	switch v {
	case "text", "jsonl":
		*o = outputFlag(v)
		return nil
	}
	return fmt.Errorf("%q is not an output format: use text or jsonl", v)
}

// sandboxFlag is --sandbox: auto, require or off.
type sandboxFlag string

func (m *sandboxFlag) String() string { return string(*m) }
func (m *sandboxFlag) Set(v string) error {
	switch v {
	case "auto", "require", "off":
		*m = sandboxFlag(v)
		return nil
	}
	return fmt.Errorf("%q is not a sandbox mode: use auto, require or off", v)
}

// sandboxFlags adds --sandbox and --allow-network to fs.
func sandboxFlags(fs *flag.FlagSet, o *options) {
	o.sandbox = "auto"
	fs.Var((*sandboxFlag)(&o.sandbox), "sandbox", "how bash commands are confined by the kernel (Linux Landlock): auto (when the kernel can), require (refuse to run commands otherwise) or off; confined commands write only in the workspace and temporary directories, cannot read credential files and have no network")
	fs.BoolVar(&o.network, "allow-network", false, "let sandboxed bash commands open network connections")
	fs.Var((*multiFlag)(&o.writable), "sandbox-write", "a directory sandboxed bash commands may change besides the workspace and the temporary and cache directories, such as ~/.npm (repeatable)")
}

// shellSandbox is the bash tool's sandbox for o's flags (nil: off).
func (o *options) shellSandbox() *shell.Sandbox {
	if o.sandbox == "off" {
		return nil
	}
	box := &shell.Sandbox{Require: o.sandbox == "require", Network: o.network}
	if len(o.writable) > 0 {
		box.Write = append(shell.DefaultWrite(), o.writable...)
	}
	return box
}

// agentFlags returns the flag set of a command that runs the agent.
func agentFlags(name string, o *options, withTemporal bool) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.maxTurns = DefaultMaxTurns
	o.output = "text"
	fs.StringVar(&o.model, "model", "", "the model, as PROVIDER:MODEL (openai:gpt-4o, anthropic:claude-sonnet-4-5, ollama:qwen2.5-coder); default $LOOM_MODEL")
	fs.StringVar(&o.baseURL, "base-url", "", "the API's base URL, for OpenAI-compatible servers and proxies; default $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL")
	fs.StringVar(&o.workspace, "workspace", "", "the directory the file tools are confined to and commands run in (default: the current directory)")
	fs.Var((*turnsFlag)(&o.maxTurns), "max-turns", fmt.Sprintf("the most model calls a run may make (default %d)", DefaultMaxTurns))
	fs.BoolVar(&o.yes, "yes", false, "approve every call the policies allow to be approved (never what they always refuse), and start the workspace's .mcp.json servers")
	fs.Var((*outputFlag)(&o.output), "output", "text, or jsonl: one JSON object per line on stdout")
	fs.BoolVar(&o.noStream, "no-stream", false, "ask for whole answers instead of streaming them")
	fs.StringVar(&o.storePath, "store", "", storeUsage)
	fs.StringVar(&o.system, "system", "", "the system prompt, instead of loom's own (AGENTS.md and LOOM.md are still added)")
	fs.Var((*multiFlag)(&o.mcp), "mcp", "an MCP server, as NAME=COMMAND ARGS... or NAME=URL (repeatable)")
	sandboxFlags(fs, o)
	if name == "loom" {
		fs.BoolVar(&o.interactive, "interactive", false, "run the interactive session even when standard input is not a terminal")
	}
	if withTemporal {
		fs.StringVar(&o.temporal, "temporal", "", "run on the Temporal server at HOST:PORT instead of in this process (loom worker must be running)")
		fs.StringVar(&o.queue, "queue", "", "the Temporal task queue (default loom)")
	}
	return fs
}

// parse parses args with fs, allowing flags after positional arguments
// ("loom run 'fix it' --yes"); "--" ends the flags. It returns the
// positional arguments and records which flags were given in set.
func parse(fs *flag.FlagSet, args []string, set map[string]bool) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			msg := err.Error()
			for _, pre := range []string{"for flag -", "not defined: -", "needs an argument: -"} {
				msg = strings.Replace(msg, pre, pre+"-", 1) // loom writes its flags --name
			}
			return nil, usagef(fmt.Sprintf("Run 'loom help %s' for its flags.", fs.Name()), "%s: %s", fs.Name(), msg)
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if len(rest) == 0 {
			break
		}
		if consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if set != nil {
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	}
	return pos, nil
}

// workerFlags returns the flag set of loom worker.
func workerFlags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.temporal, "temporal", "", "the Temporal server, as HOST:PORT")
	fs.StringVar(&o.queue, "queue", "", "the task queue to poll (default loom)")
	fs.StringVar(&o.model, "model", "", "the model runs may use, as PROVIDER:MODEL; default $LOOM_MODEL")
	fs.StringVar(&o.baseURL, "base-url", "", "the API's base URL (default $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL)")
	fs.StringVar(&o.workspace, "workspace", "", "the directory the tools work in (default: the current directory)")
	fs.StringVar(&o.blobs, "blobs", "", blobsUsage)
	sandboxFlags(fs, o)
	return fs
}
