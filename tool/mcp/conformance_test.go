package mcp

// The official MCP conformance suite (@modelcontextprotocol/conformance,
// installed by testenv/install.sh, run on the Node 22 it installs) against
// loom's streamable HTTP server and loom's client. The scenarios loom does
// not pass are listed, each with its reason, in
// testdata/conformance-baseline.yml; the suite fails on a new failure and
// on a baseline entry that now passes.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

// conformanceTools are the tools the server scenarios call, as far as loom
// tools can express them (text results only; no progress, logging,
// sampling or elicitation from inside a tool).
func conformanceTools() []tool.Tool {
	noArgs := json.RawMessage(`{"type":"object","properties":{}}`)
	simple := &fnTool{
		spec: llm.ToolSpec{Name: "test_simple_text", Description: "Returns simple text", Schema: noArgs, Effect: llm.EffectReadOnly},
		fn: func(context.Context, json.RawMessage) (llm.ToolResult, error) {
			return llm.ToolResult{Content: "This is a simple text response for testing."}, nil
		},
	}
	failing := &fnTool{
		spec: llm.ToolSpec{Name: "test_error_handling", Description: "Always fails", Schema: noArgs, Effect: llm.EffectReadOnly},
		fn: func(context.Context, json.RawMessage) (llm.ToolResult, error) {
			return llm.ToolResult{Content: "This tool intentionally returns an error for testing", IsError: true}, nil
		},
	}
	schema := &fnTool{
		spec: llm.ToolSpec{
			Name:        "json_schema_2020_12_tool",
			Description: "Tool with JSON Schema 2020-12 features",
			Schema: json.RawMessage(`{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"type": "object",
				"$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
				"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
				"additionalProperties": false
			}`),
			Effect: llm.EffectReadOnly,
		},
		fn: func(_ context.Context, args json.RawMessage) (llm.ToolResult, error) {
			return llm.ToolResult{Content: string(args)}, nil
		},
	}
	return []tool.Tool{simple, failing, schema}
}

// runConformanceClient is the client the client scenarios run: it connects
// with this package's Client, and calls every tool the scenario's server
// offers with arguments made up from its schema.
func runConformanceClient(url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	c, err := Connect(ctx, ServerConfig{Name: "conformance", URL: url}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	for _, t := range c.Tools() {
		res, err := t.Call(ctx, exampleArgs(t.Spec().Schema))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("%s: error=%v %s\n", t.Spec().Name, res.IsError, res.Content)
	}
	return 0
}

// exampleArgs makes arguments that satisfy the required properties of a
// simple object schema.
func exampleArgs(schema json.RawMessage) json.RawMessage {
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	json.Unmarshal(schema, &s)
	args := map[string]any{}
	for _, name := range s.Required {
		switch s.Properties[name].Type {
		case "number", "integer":
			args[name] = 1
		case "boolean":
			args[name] = true
		case "array":
			args[name] = []any{}
		case "object":
			args[name] = map[string]any{}
		default:
			args[name] = "x"
		}
	}
	b, _ := json.Marshal(args)
	return b
}

// runConformance runs the suite's CLI with args in a temporary directory
// (it writes results there) and fails the test when it fails.
func runConformance(t *testing.T, args ...string) {
	t.Helper()
	node := node22(t)
	cli := filepath.Join(testenvDir(t), "@modelcontextprotocol", "conformance", "dist", "index.js")
	baseline, err := filepath.Abs(filepath.Join("testdata", "conformance-baseline.yml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{cli}, append(args, "--expected-failures", baseline)...)...)
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err != nil {
		t.Fatalf("conformance %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	t.Logf("conformance %s:\n%s", strings.Join(args, " "), lastLines(out.String(), 40))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func TestConformanceServer(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite takes a while")
	}
	s, err := NewServer(conformanceTools(), &ServeOptions{Name: "loom-conformance"})
	if err != nil {
		t.Fatal(err)
	}
	_, url := loopbackServer(t, s.Handler(nil))
	runConformance(t, "server", "--url", url, "--suite", "all")
}

func TestConformanceClient(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite takes a while")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(roleEnv, "conformance-client")
	runConformance(t, "client", "--command", exe, "--suite", "all")
}
