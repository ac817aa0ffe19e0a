package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/loomkit/loom/tool"
	loomfs "github.com/loomkit/loom/tool/fs"
	"github.com/loomkit/loom/tool/mcp"
	"github.com/loomkit/loom/tool/shell"
	"github.com/loomkit/loom/tool/web"
)

// toolbox is the coding toolset over one workspace, and the MCP servers
// whose tools are added to it.
type toolbox struct {
	files *loomfs.Toolset
	bash  *shell.Tool
	fetch *web.Tool
	group *mcp.Group
}

// openToolbox opens the coding tools over ws (an absolute directory), with
// box confining bash (nil: unconfined).
func openToolbox(ws string, box *shell.Sandbox) (*toolbox, error) {
	files, err := loomfs.New(ws, nil)
	if err != nil {
		return nil, usagef("Give --workspace a directory you can read.", "cannot open the workspace %s: %v", ws, err)
	}
	return &toolbox{
		files: files,
		bash:  shell.New(&shell.Config{Dir: files.Dir(), Sandbox: box}),
		fetch: web.New(nil),
	}, nil
}

// coding returns the coding toolset, in its fixed order.
func (tb *toolbox) coding() []tool.Tool {
	ts := tb.files.Tools()
	return append(ts, tb.bash, tb.fetch)
}

// set returns the tools to offer the model: the coding toolset and the
// MCP servers' tools as they are now.
func (tb *toolbox) set() (*tool.Set, error) {
	ts := tb.coding()
	if tb.group != nil {
		ts = append(ts, tb.group.Tools()...)
	}
	return tool.NewSet(ts...)
}

func (tb *toolbox) close() {
	if tb.group != nil {
		tb.group.Close()
	}
	tb.files.Close()
}

// ProjectMCPFile is the file in the workspace that lists the project's MCP
// servers, in the format other MCP clients use.
const ProjectMCPFile = ".mcp.json"

// mcpPlan is the MCP servers a session may start: those given with --mcp
// (always started: the user named them) and those of the workspace's
// .mcp.json (started only when trusted: they run commands a repository
// chose, the way a planted git hook would).
type mcpPlan struct {
	flags   []mcp.ServerConfig
	project []mcp.ServerConfig
	notes   []string
}

func planMCP(ws string, flagValues []string, getenv func(string) string) (mcpPlan, error) {
	var p mcpPlan
	names := map[string]bool{}
	for _, v := range flagValues {
		cfg, err := mcp.ParseFlag(v)
		if err != nil {
			return p, usagef("Give --mcp as NAME=COMMAND ARGS... or NAME=URL.", "--mcp %q: %v", v, err)
		}
		if names[cfg.Name] {
			return p, usagef("Give each MCP server its own name.", "--mcp: two servers are named %q", cfg.Name)
		}
		names[cfg.Name] = true
		p.flags = append(p.flags, cfg)
	}
	path := filepath.Join(ws, ProjectMCPFile)
	cfgs, err := mcp.LoadConfigFile(path, &mcp.LoadOptions{LookupEnv: func(k string) (string, bool) {
		v := getenv(k)
		return v, v != ""
	}})
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		p.notes = append(p.notes, fmt.Sprintf("%s not used: %v", ProjectMCPFile, err))
	default:
		for _, c := range cfgs {
			if names[c.Name] {
				p.notes = append(p.notes, fmt.Sprintf("%s: server %q is also given with --mcp; the flag wins", ProjectMCPFile, c.Name))
				continue
			}
			p.project = append(p.project, c)
		}
	}
	return p, nil
}

// describe says what starting a server runs.
func describeServer(c mcp.ServerConfig) string {
	if c.IsHTTP() {
		return c.Name + " (" + c.URL + ")"
	}
	return c.Name + " (" + strings.Join(append([]string{c.Command}, c.Args...), " ") + ")"
}

// connectMCP starts or reaches the servers; one that fails is left out and
// reported in the returned warnings.
func (tb *toolbox) connectMCP(ctx context.Context, cfgs []mcp.ServerConfig) []string {
	if len(cfgs) == 0 {
		return nil
	}
	g, err := mcp.ConnectAll(ctx, cfgs, &mcp.Options{BaseEnv: os.Environ()})
	tb.group = g
	if err == nil {
		return nil
	}
	var warnings []string
	for _, e := range unjoin(err) {
		warnings = append(warnings, "MCP server not used: "+e.Error())
	}
	return warnings
}

func unjoin(err error) []error {
	var ce *mcp.ConfigError
	if errors.As(err, &ce) {
		return []error{err}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
