package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/loomkit/loom/tool/mcp"
)

// mcpCmd is "loom mcp serve [--workspace DIR] [--http ADDR]": the coding
// toolset, under the same sandbox and shell policy, served over MCP.
func (a *app) mcpCmd(args []string) error {
	if len(args) == 0 || args[0] != "serve" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return a.helpCmd([]string{"mcp"})
		}
		return usagef("Run 'loom help mcp'.", "loom mcp needs a subcommand: serve")
	}
	fs := flag.NewFlagSet("mcp serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	workspace := fs.String("workspace", "", "the directory the tools work in (default: the current directory)")
	var o options
	sandboxFlags(fs, &o)
	addr := fs.String("http", "", "serve streamable HTTP on ADDR (a loopback address such as 127.0.0.1:8765) instead of standard input and output")
	pos, err := parse(fs, args[1:], nil)
	if errors.Is(err, flag.ErrHelp) {
		return a.helpCmd([]string{"mcp"})
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("Run 'loom help mcp'.", "loom mcp serve takes no arguments (got %q)", pos[0])
	}
	if *addr != "" {
		if err := loopbackOnly(*addr); err != nil {
			return err
		}
	}
	ws, err := workspaceDir(*workspace)
	if err != nil {
		return err
	}
	tb, err := openToolbox(ws, o.shellSandbox())
	if err != nil {
		return err
	}
	defer tb.close()
	opts := &mcp.ServeOptions{
		Name:         "loom",
		Version:      Version(),
		Instructions: fmt.Sprintf("loom's coding tools over the workspace %s: file paths are relative to it and bash runs in it. Tools that are not read-only change files or run commands: ask the user before calling them.", tb.files.Dir()),
	}
	srv, err := mcp.NewServer(tb.coding(), opts)
	if err != nil {
		return fmt.Errorf("cannot serve the tools: %w", err)
	}
	ctx, stop := a.signals(context.Background(), nil)
	defer stop()
	if *addr == "" {
		err := srv.ServeStdio(ctx)
		if errors.Is(context.Cause(ctx), errInterrupted) {
			return &exitError{code: ExitInterrupted}
		}
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return usagef("Give --http a free loopback address, such as 127.0.0.1:8765.", "cannot listen on %s: %v", *addr, err)
	}
	hs := &http.Server{Handler: srv.Handler(nil), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(a.env.Stderr, "loom: serving %d tools of %s over MCP at http://%s/mcp\n", len(tb.coding()), tb.files.Dir(), ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("the MCP server stopped: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	return &exitError{code: ExitInterrupted}
}

// loopbackOnly refuses addresses other than loopback ones: the tools run
// commands with the user's rights and the endpoint has no authentication.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("Give --http as HOST:PORT, such as 127.0.0.1:8765.", "--http %q: %v", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return usagef("Serve on a loopback address (127.0.0.1:PORT) and reach it through an SSH tunnel or an authenticating proxy.",
		"--http %q is not a loopback address: the tools would run commands for anyone who can reach it", addr)
}
