package tooltest_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
	"github.com/loomkit/loom/tool/tooltest"
)

type args struct {
	Path  string `json:"path" jsonschema:"a path"`
	Count int    `json:"count,omitempty"`
}

func good(ran *atomic.Int32) tool.Tool {
	return tool.Func("good", "a well-behaved tool", func(ctx context.Context, in args) (string, error) {
		ran.Add(1)
		if in.Path == "missing" {
			return "", errors.New("no such file")
		}
		if in.Path == "slow" {
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "got " + in.Path, nil
	}, &tool.FuncOptions[args]{Effect: llm.EffectReadOnly})
}

func TestGoodToolPasses(t *testing.T) {
	var ran atomic.Int32
	(&tooltest.Suite{
		Tool: good(&ran),
		Cases: []tooltest.Case{
			{Name: "ok", Args: `{"path":"a"}`, Contains: "got a"},
			{Name: "fails", Args: `{"path":"missing"}`, WantError: true, Contains: "no such file"},
			{Name: "blocks", Args: `{"path":"slow"}`, Blocks: true},
		},
		Ran: func() int { return int(ran.Load()) },
	}).Run(t)
	if ran.Load() == 0 {
		t.Error("the suite never ran the tool")
	}
}

// Bad tools: each breaks one rule. The suite must fail on each; it runs in
// a child process, since a failing suite fails its test.

type handmade struct {
	spec llm.ToolSpec
	call func(ctx context.Context, args json.RawMessage) (llm.ToolResult, error)
}

func (h handmade) Spec() llm.ToolSpec { return h.spec }
func (h handmade) Call(ctx context.Context, a json.RawMessage) (llm.ToolResult, error) {
	return h.call(ctx, a)
}

var objSchema = json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)

func okCall(context.Context, json.RawMessage) (llm.ToolResult, error) {
	return llm.ToolResult{Content: "fine"}, nil
}

var unvalidatedRuns atomic.Int32

var badTools = map[string]struct {
	tool tool.Tool
	ran  func() int
	want string // in the suite's failure output
}{
	"bad name":         {handmade{llm.ToolSpec{Name: "fs.read", Schema: objSchema}, okCall}, nil, "invalid tool name"},
	"array schema":     {handmade{llm.ToolSpec{Name: "x", Schema: json.RawMessage(`{"type":"array"}`)}, okCall}, nil, `want "object"`},
	"no schema":        {handmade{llm.ToolSpec{Name: "x"}, okCall}, nil, "no schema"},
	"bad effect":       {handmade{llm.ToolSpec{Name: "x", Schema: objSchema, Effect: "sometimes"}, okCall}, nil, "spec effect \"sometimes\""},
	"accepts anything": {handmade{llm.ToolSpec{Name: "x", Schema: objSchema}, okCall}, nil, "want an error result"},
	"go error": {handmade{llm.ToolSpec{Name: "x", Schema: objSchema}, func(context.Context, json.RawMessage) (llm.ToolResult, error) {
		return llm.ToolResult{}, errors.New("disk on fire")
	}}, nil, "returned a Go error"},
	"panics": {handmade{llm.ToolSpec{Name: "x", Schema: objSchema}, func(context.Context, json.RawMessage) (llm.ToolResult, error) {
		panic("kaboom")
	}}, nil, "panicked: kaboom"},
	"invalid utf8": {handmade{llm.ToolSpec{Name: "x", Schema: objSchema}, func(context.Context, json.RawMessage) (llm.ToolResult, error) {
		return llm.ToolResult{Content: "bad \xff", IsError: true}, nil
	}}, nil, "not valid UTF-8"},
	"vague errors": {handmade{llm.ToolSpec{Name: "x", Schema: objSchema}, func(context.Context, json.RawMessage) (llm.ToolResult, error) {
		return llm.ToolResult{Content: "error", IsError: true}, nil
	}}, nil, "does not name the field"},
	"ignores cancel": {handmade{llm.ToolSpec{Name: "x", Schema: objSchema}, func(ctx context.Context, a json.RawMessage) (llm.ToolResult, error) {
		select {} // never returns
	}}, nil, "did not return within"},
	"runs on invalid": {handmade{llm.ToolSpec{Name: "x", Schema: objSchema}, func(ctx context.Context, a json.RawMessage) (llm.ToolResult, error) {
		unvalidatedRuns.Add(1)
		return llm.ToolResult{Content: "bad arguments: path", IsError: true}, nil
	}}, func() int { return int(unvalidatedRuns.Load()) }, "times on invalid arguments"},
}

func TestBadToolHelper(t *testing.T) {
	name := os.Getenv("TOOLTEST_BAD_TOOL")
	if name == "" {
		t.Skip("run by TestBadToolsFail in a child process")
	}
	b := badTools[name]
	(&tooltest.Suite{Tool: b.tool, Ran: b.ran, Timeout: 300 * time.Millisecond, Prompt: 200 * time.Millisecond}).Run(t)
}

func TestBadToolsFail(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for name, b := range badTools {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBadToolHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "TOOLTEST_BAD_TOOL="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a tool that breaks a rule; output:\n%s", out)
			}
			if !strings.Contains(string(out), b.want) {
				t.Errorf("output lacks %q:\n%s", b.want, out)
			}
		})
	}
}
