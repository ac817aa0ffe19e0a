package mcp_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/loomkit/loom/tool"
	"github.com/loomkit/loom/tool/mcp"
)

func ExampleParseFlag() {
	c, err := mcp.ParseFlag(`fs=npx -y @modelcontextprotocol/server-filesystem "my project"`)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s %q\n", c.Name, c.Command, c.Args)

	_, err = mcp.ParseFlag("npx server")
	fmt.Println(err)
	// Output:
	// fs: npx ["-y" "@modelcontextprotocol/server-filesystem" "my project"]
	// --mcp npx server: want NAME=COMMAND [ARGS...] or NAME=URL, for example fs=npx -y @modelcontextprotocol/server-filesystem .
}

func ExampleParseConfig() {
	servers, err := mcp.ParseConfig([]byte(`{"mcpServers": {
		"docs": {"url": "https://docs.example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN:-none}"}},
		"fs":   {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]}
	}}`), &mcp.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range servers {
		if s.IsHTTP() {
			fmt.Println(s.Name, s.URL, s.Headers["Authorization"])
		} else {
			fmt.Println(s.Name, s.Command, s.Args)
		}
	}
	// Output:
	// docs https://docs.example.com/mcp Bearer none
	// fs npx [-y @modelcontextprotocol/server-filesystem .]
}

// The tools of the servers in a workspace's .mcp.json, refreshed between
// turns.
func ExampleConnectAll() {
	ctx := context.Background()
	servers, err := mcp.LoadConfigFile(".mcp.json", nil)
	if err != nil {
		log.Fatal(err)
	}
	group, err := mcp.ConnectAll(ctx, servers, nil)
	if err != nil {
		log.Print(err) // the servers that connected are in the group
	}
	defer group.Close()

	tools, err := tool.NewSet(group.Tools()...)
	if err != nil {
		log.Fatal(err)
	}
	for turn := 0; turn < 10; turn++ {
		select {
		case <-group.Changed():
			if tools, err = tool.NewSet(group.Tools()...); err != nil {
				log.Fatal(err)
			}
		default:
		}
		_ = tools // advertise tools.Specs() to the model, run its calls with tools.Call
	}
}

// Serving loom tools over stdio, as `loom mcp serve` does.
func ExampleServe() {
	var tools []tool.Tool // the coding toolset
	if err := mcp.Serve(context.Background(), tools, &mcp.ServeOptions{Name: "loom"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// Serving loom tools over streamable HTTP, on loopback.
func ExampleNewHandler() {
	var tools []tool.Tool
	h, err := mcp.NewHandler(tools, nil)
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/mcp", h)
	log.Fatal(http.ListenAndServe("127.0.0.1:8931", nil))
}
