package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/loomkit/loom/tool"
)

// Group is the clients of several MCP servers, whose tools it names as one
// set: names are unique across all the servers (see the package doc). It
// is safe for concurrent use.
type Group struct {
	clients []*Client
	changed chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

// ConnectAll connects to the servers of cfgs at once (see [Connect]). Server
// names must be unique, else it returns a [*ConfigError] and connects to
// none. A server that cannot be reached does not stop the others: the
// Group holds those that connected, and the error joins a
// [*ServerError] for each that did not. The Group is never nil.
func ConnectAll(ctx context.Context, cfgs []ServerConfig, opts *Options) (*Group, error) {
	seen := make(map[string]bool, len(cfgs))
	for _, c := range cfgs {
		if err := c.Validate(); err != nil {
			return newGroup(nil), err
		}
		if seen[c.Name] {
			return newGroup(nil), &ConfigError{Server: c.Name, Err: errors.New("two servers have this name; names must be unique")}
		}
		seen[c.Name] = true
	}
	clients := make([]*Client, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Go(func() { clients[i], errs[i] = Connect(ctx, cfg, opts) })
	}
	wg.Wait()
	var ok []*Client
	for _, c := range clients {
		if c != nil {
			ok = append(ok, c)
		}
	}
	return newGroup(ok), errors.Join(errs...)
}

func newGroup(clients []*Client) *Group {
	g := &Group{clients: clients, changed: make(chan struct{}, 1), stop: make(chan struct{})}
	for _, c := range clients {
		g.wg.Go(func() {
			for {
				select {
				case <-g.stop:
					return
				case <-c.Changed():
					select {
					case g.changed <- struct{}{}:
					default:
					}
				}
			}
		})
	}
	return g
}

// Clients returns the clients of the group, in the order of the configs.
func (g *Group) Clients() []*Client { return append([]*Client(nil), g.clients...) }

// Tools returns the tools of every server, server by server, each in the
// server's order, with names unique across the group. It does no IO.
func (g *Group) Tools() []tool.Tool {
	var (
		keys  []toolKey
		all   []*remoteTool
		owner []string
	)
	for _, c := range g.clients {
		c.mu.Lock()
		for _, t := range c.tools {
			rt := t.(*remoteTool)
			keys = append(keys, toolKey{c.cfg.Name, rt.remote})
			all = append(all, rt)
			owner = append(owner, c.cfg.Name)
		}
		c.mu.Unlock()
	}
	names := exposedNames(keys)
	out := make([]tool.Tool, len(all))
	for i, rt := range all {
		out[i] = rt.withName(names[toolKey{owner[i], rt.remote}])
	}
	return out
}

// Changed returns a channel that receives a value after the set returned
// by [Group.Tools] has changed.
func (g *Group) Changed() <-chan struct{} { return g.changed }

// Refresh lists the tools of every server now (see [Client.Refresh]) and
// joins the errors.
func (g *Group) Refresh(ctx context.Context) error {
	errs := make([]error, len(g.clients))
	var wg sync.WaitGroup
	for i, c := range g.clients {
		wg.Go(func() { errs[i] = c.Refresh(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close closes every client at once (see [Client.Close]).
func (g *Group) Close() error {
	g.once.Do(func() { close(g.stop) })
	var wg sync.WaitGroup
	for _, c := range g.clients {
		wg.Go(func() { c.Close() })
	}
	wg.Wait()
	g.wg.Wait()
	return nil
}

// String describes the group for logs.
func (g *Group) String() string {
	names := make([]string, len(g.clients))
	for i, c := range g.clients {
		names[i] = c.cfg.Name
	}
	return fmt.Sprintf("MCP servers %q", names)
}
