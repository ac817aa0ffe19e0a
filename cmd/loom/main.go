// Command loom is a coding agent for the terminal, built on the loom
// framework: it reads, writes and edits files in a workspace, runs commands
// under a shell policy, asks before anything that needs approval, streams
// its answer, checkpoints every step to a SQLite store so that a run can
// be resumed after a crash, and speaks both the OpenAI and the Anthropic
// wire formats.
//
//	loom run [flags] PROMPT        one-shot, non-interactive
//	loom [flags]                   interactive session (on a terminal)
//	loom resume RUN_ID [PROMPT]    continue a stored run, or its conversation
//	loom runs                      list stored runs
//	loom demo                      offline demo against a local fake server
//	loom mcp serve                 serve the coding tools over MCP
//	loom version | loom help
//
// Run "loom help" for the flags. Exit status: 0 done, 1 the run failed,
// 2 usage or configuration error, 130 interrupted by Ctrl-C after the run
// was checkpointed.
package main

import (
	"os"

	"github.com/loomkit/loom/cmd/loom/internal/cli"
)

func main() {
	os.Exit(cli.Main(cli.Env{
		Args:   os.Args[1:],
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	}))
}
