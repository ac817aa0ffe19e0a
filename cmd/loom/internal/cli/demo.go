package cli

import (
	"context"

	"github.com/loomkit/loom/cmd/loom/internal/demo"
	"github.com/loomkit/loom/cmd/loom/internal/ui"
)

// demoCmd is "loom demo".
func (a *app) demoCmd(args []string) error {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" {
			return a.helpCmd([]string{"demo"})
		}
		return usagef("Run 'loom help demo'.", "loom demo takes no arguments (got %q)", args[0])
	}
	term := false
	if f, ok := fileOf(a.env.Stdout); ok {
		term = ui.IsTerminal(f)
	}
	ctx, stop := a.signals(context.Background(), nil)
	defer stop()
	if !demo.Run(ctx, demo.Options{Out: a.env.Stdout, Color: term && ui.ColorAllowed(a.env.Getenv)}) {
		return &exitError{code: ExitFailed}
	}
	return nil
}
