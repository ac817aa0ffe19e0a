package cli

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

const mainHelp = `loom: a coding agent for the terminal.

Usage:
  loom run [flags] PROMPT        run one task, non-interactively (PROMPT "-" reads standard input)
  loom [flags]                   an interactive session (on a terminal)
  loom resume RUN_ID [PROMPT]    continue a stored run, or its conversation with a new prompt
  loom runs                      list stored runs
  loom demo                      an offline demo against a local fake model server
  loom mcp serve                 serve the coding tools over MCP (stdio, or --http ADDR)
  loom worker --temporal ADDR    run a Temporal worker for runs started with --temporal
  loom approve --temporal ADDR RUN_ID   approve or deny the calls a Temporal run waits for
  loom version                   print the version
  loom help [COMMAND]            this help, or a command's flags

Flags of run, resume and the interactive session:
%s
The model: --model PROVIDER:MODEL, or LOOM_MODEL. Providers: openai and anthropic
(keys from OPENAI_API_KEY, ANTHROPIC_API_KEY; URLs from OPENAI_BASE_URL,
ANTHROPIC_BASE_URL), and the OpenAI-compatible openrouter (OPENROUTER_API_KEY),
deepseek (DEEPSEEK_API_KEY) and ollama (no key; OLLAMA_BASE_URL). Any other
OpenAI-compatible server: --model openai:NAME --base-url URL (no key needed
when the URL is not api.openai.com).

Tools: read_file, write_file, edit_file, list_dir, glob, grep (confined to the
workspace), bash (under a policy: read-only commands run, others need approval,
destructive ones are always refused), web_fetch (public addresses only), and
the tools of MCP servers (--mcp, and the workspace's .mcp.json with --yes).
Without --yes, loom run denies calls that need approval and tells the model.

AGENTS.md and LOOM.md at the workspace root are added to the system prompt.
Every run is checkpointed; its id is printed on stderr.

Exit status: 0 done, 1 the run failed, 2 usage or configuration error,
130 interrupted (Ctrl-C) after the run was saved.
`

// helpCmd is "loom help [COMMAND]".
func (a *app) helpCmd(args []string) error {
	out := a.env.Stdout
	if len(args) == 0 {
		fmt.Fprintf(out, mainHelp, flagHelp(agentFlags("loom", &options{}, false)))
		return nil
	}
	switch args[0] {
	case "run", "resume", "loom":
		usage := map[string]string{
			"run":    "loom run [flags] PROMPT",
			"resume": "loom resume [flags] RUN_ID [PROMPT]",
			"loom":   "loom [flags]",
		}[args[0]]
		fmt.Fprintf(out, "Usage: %s\n\n%s", usage, flagHelp(agentFlags(args[0], &options{}, args[0] == "run")))
	case "runs":
		fmt.Fprint(out, "Usage: loom runs [--store PATH|URL] [--limit N] [--output text|jsonl]\n\nLists stored runs, newest first: id, status, when it started, model turns, model and the first line of the prompt.\n")
	case "demo":
		fmt.Fprint(out, "Usage: loom demo\n\nStarts a fake model server on loopback and runs scenarios through the real adapters and tools in a temporary workspace. Needs no network and no key. Exit status 0 when every scenario behaved.\n")
	case "mcp":
		fmt.Fprint(out, "Usage: loom mcp serve [--workspace DIR] [--http ADDR]\n\nServes read_file, write_file, edit_file, list_dir, glob, grep, bash and web_fetch over the Model Context Protocol: over standard input and output, or over streamable HTTP at http://ADDR/mcp (a loopback address: the tools are not authenticated). The shell policy's refusals hold; calls that need approval are left to the MCP client, which sees the tools' annotations.\n")
	case "worker":
		fmt.Fprintf(out, "Usage: loom worker --temporal HOST:PORT [flags]\n\nRuns a Temporal worker that executes the model and tool calls of runs started with loom run --temporal, with the model's key from the environment.\n\n%s", flagHelp(workerFlags(&options{})))
	case "approve":
		fmt.Fprint(out, "Usage: loom approve --temporal HOST:PORT [--deny] [--reason TEXT] RUN_ID [DECISION...]\n\nDecides about the calls a run on Temporal waits for. A DECISION is CALL_ID (approve it; deny it with --deny), CALL_ID=approve, CALL_ID=deny:REASON, CALL_ID=abort:REASON or CALL_ID=edit:{...} (run it with these JSON arguments). Without decisions, every waiting call is approved (or, with --deny, denied).\n")
	case "version", "help":
		fmt.Fprintf(out, "Usage: loom %s\n", args[0])
	default:
		return usagef("Run 'loom help' for the commands.", "no help for %q: unknown command", args[0])
	}
	return nil
}

// flagArgs name the argument of each flag that takes one, in help.
var flagArgs = map[string]string{
	"model": "PROVIDER:MODEL", "base-url": "URL", "workspace": "DIR", "max-turns": "N",
	"output": "text|jsonl", "store": "PATH|URL", "blobs": "URL|DIR", "system": "TEXT", "mcp": "NAME=COMMAND",
	"temporal": "HOST:PORT", "queue": "NAME", "http": "ADDR", "limit": "N", "reason": "TEXT",
}

// flagHelp lists the flags of fs, one per line with its description.
func flagHelp(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		line := "  --" + f.Name
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !bf.IsBoolFlag() {
			arg := flagArgs[f.Name]
			if arg == "" {
				arg = "VALUE"
			}
			line += " " + arg
		}
		if len(line) > 26 {
			fmt.Fprintf(&b, "%s\n%28s%s\n", line, "", f.Usage)
			return
		}
		fmt.Fprintf(&b, "%-28s%s\n", line, f.Usage)
	})
	return b.String()
}

// versionCmd is "loom version".
func (a *app) versionCmd(args []string) error {
	if len(args) > 0 {
		return usagef("", "loom version takes no arguments")
	}
	fmt.Fprintf(a.env.Stdout, "loom %s (%s, %s/%s)\n", Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// Version returns loom's version: the module version it was installed at
// (go install ...@v1.2.3), else the commit it was built from.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return "devel-" + strings.TrimSpace(rev[:min(12, len(rev))]) + dirty
}
