package mcp

import (
	"context"
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomkit/loom/tool"
)

// benchCall measures one tool call through the client, against c.
func benchCall(b *testing.B, c *Client, name string) {
	b.Helper()
	var tl tool.Tool
	for _, t := range c.Tools() {
		if t.Spec().Name == name {
			tl = t
		}
	}
	if tl == nil {
		b.Fatalf("no tool %s", name)
	}
	args := json.RawMessage(`{"text":"hello"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := tl.Call(ctx, args)
		if err != nil || res.IsError {
			b.Fatal(err, res.Content)
		}
	}
}

func BenchmarkCallStdio(b *testing.B) {
	c, err := Connect(context.Background(), stdioConfig(b, "t", nil), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchCall(b, c, "t_echo")
}

func BenchmarkCallHTTP(b *testing.B) {
	s, err := NewServer([]tool.Tool{echoTool("echo")}, nil)
	if err != nil {
		b.Fatal(err)
	}
	_, url := loopbackServer(b, s.Handler(nil))
	c, err := Connect(context.Background(), ServerConfig{Name: "h", URL: url}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchCall(b, c, "h_echo")
}

func BenchmarkToResult(b *testing.B) {
	res := &sdk.CallToolResult{Content: []sdk.Content{
		&sdk.TextContent{Text: "some text of a tool result"},
		&sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 1024)},
	}}
	b.ReportAllocs()
	for b.Loop() {
		toResult(res, 30_000)
	}
}
