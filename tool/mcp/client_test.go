package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomkit/loom/internal/testimage"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

func connect(t *testing.T, cfg ServerConfig, opts *Options) *Client {
	t.Helper()
	c, err := Connect(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// pidOf asks the stdio test server for its pid.
func pidOf(t *testing.T, c *Client) int {
	t.Helper()
	res := call(t, context.Background(), c.Tools(), c.Name()+"_pid", `{}`)
	pid, err := strconv.Atoi(res.Content)
	if err != nil || res.IsError {
		t.Fatalf("pid: %+v", res)
	}
	return pid
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func TestClientStdio(t *testing.T) {
	c := connect(t, stdioConfig(t, "t", nil), nil)
	specs := map[string]llm.ToolSpec{}
	for _, tl := range c.Tools() {
		specs[tl.Spec().Name] = tl.Spec()
	}
	for _, n := range []string{"t_echo", "t_pid", "t_sleep", "t_crash", "t_add_tool"} {
		if _, ok := specs[n]; !ok {
			t.Fatalf("no tool %s among %v", n, names(c.Tools()))
		}
	}
	if s := specs["t_echo"]; s.Effect != llm.EffectReadOnly || s.NeedsApproval {
		t.Errorf("t_echo: effect %v, approval %v; want read-only without approval", s.Effect, s.NeedsApproval)
	}
	if s := specs["t_crash"]; s.Effect != llm.EffectDestructive || !s.NeedsApproval {
		t.Errorf("t_crash: effect %v, approval %v; want destructive with approval", s.Effect, s.NeedsApproval)
	}
	if s := specs["t_echo"]; !strings.Contains(string(s.Schema), `"text"`) {
		t.Errorf("t_echo schema %s lost its properties", s.Schema)
	}

	res := call(t, context.Background(), c.Tools(), "t_echo", `{"text":"hi"}`)
	if res.IsError || res.Content != "echo: hi" {
		t.Errorf("echo: %+v", res)
	}
	for _, bad := range []string{`[1]`, `{"text":`, `"x"`} {
		if res := call(t, context.Background(), c.Tools(), "t_echo", bad); !res.IsError || !strings.Contains(res.Content, "not one JSON object") {
			t.Errorf("arguments %s: %+v", bad, res)
		}
	}
	if res := call(t, context.Background(), c.Tools(), "t_echo", ``); res.IsError || res.Content != "echo: " {
		t.Errorf("empty arguments: %+v", res)
	}

	pid := pidOf(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("server process %d is still running after Close", pid)
	}
	res = call(t, context.Background(), c.Tools(), "t_echo", `{}`)
	if !res.IsError || !strings.Contains(res.Content, "closed") {
		t.Errorf("call after Close: %+v", res)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestClientStdioCloseKillsTheGroup(t *testing.T) {
	childFile := filepath.Join(t.TempDir(), "child")
	c := connect(t, stdioConfig(t, "t", map[string]string{"LOOM_MCP_TEST_CHILD": childFile}), nil)
	child, err := strconv.Atoi(readFile(childFile))
	if err != nil {
		t.Fatalf("the server did not say which child it started: %v", err)
	}
	pid := pidOf(t, c)
	if !alive(child) {
		t.Fatalf("the server's child %d is not running", child)
	}
	c.Close()
	if alive(pid) {
		t.Errorf("server %d still runs after Close", pid)
	}
	// The grandchild was not our child, so nothing reaps it but init:
	// wait for it to go.
	eventually(t, 10*time.Second, fmt.Sprintf("the server's child %d still runs after Close", child), func() bool { return !alive(child) })
}

func TestClientStdioCancellation(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "mark")
	c := connect(t, stdioConfig(t, "t", map[string]string{"LOOM_MCP_TEST_MARK": mark}), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan llm.ToolResult, 1)
	go func() { done <- call(t, ctx, c.Tools(), "t_sleep", `{}`) }()
	eventually(t, 10*time.Second, "the sleep tool did not start", func() bool { return readFile(mark) == "started" })
	cancel()
	res := <-done
	if !res.IsError || !strings.Contains(res.Content, "cancelled") {
		t.Errorf("cancelled call: %+v", res)
	}
	// The server was sent notifications/cancelled, which cancelled the
	// tool's context there.
	eventually(t, 10*time.Second, "the server was not told the call was cancelled", func() bool { return readFile(mark) == "cancelled" })
	// The session survives.
	if res := call(t, context.Background(), c.Tools(), "t_echo", `{"text":"still here"}`); res.IsError {
		t.Errorf("call after cancellation: %+v", res)
	}
	// A call with a context already done is not sent.
	if res := call(t, ctx, c.Tools(), "t_echo", `{}`); !res.IsError || !strings.Contains(res.Content, "was not called") {
		t.Errorf("call with a done context: %+v", res)
	}
}

func TestClientStdioCrashAndRestart(t *testing.T) {
	c := connect(t, stdioConfig(t, "t", nil), nil)
	before := pidOf(t, c)
	res := call(t, context.Background(), c.Tools(), "t_crash", `{}`)
	if !res.IsError {
		t.Fatalf("crash: %+v", res)
	}
	for _, want := range []string{`MCP server "t" went away during the call`, "exited with status 3", "boom: the crash tool was called", "may or may not have had an effect"} {
		if !strings.Contains(res.Content, want) {
			t.Errorf("crash result %q does not say %q", res.Content, want)
		}
	}
	if alive(before) {
		t.Errorf("crashed server %d was not reaped", before)
	}
	// The next call starts the server again.
	res = call(t, context.Background(), c.Tools(), "t_echo", `{"text":"again"}`)
	if res.IsError || res.Content != "echo: again" {
		t.Fatalf("call after crash: %+v", res)
	}
	if after := pidOf(t, c); after == before {
		t.Errorf("the server was not restarted (pid %d)", after)
	}
}

func TestClientStdioKilledMidCall(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "mark")
	c := connect(t, stdioConfig(t, "t", map[string]string{"LOOM_MCP_TEST_MARK": mark}), nil)
	pid := pidOf(t, c)
	done := make(chan llm.ToolResult, 1)
	go func() { done <- call(t, context.Background(), c.Tools(), "t_sleep", `{}`) }()
	eventually(t, 10*time.Second, "the sleep tool did not start", func() bool { return readFile(mark) == "started" })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if !res.IsError || !strings.Contains(res.Content, "went away during the call") || !strings.Contains(res.Content, "killed") {
		t.Errorf("killed mid-call: %+v", res)
	}
	if res := call(t, context.Background(), c.Tools(), "t_echo", `{"text":"x"}`); res.IsError {
		t.Errorf("call after kill: %+v", res)
	}
}

func TestClientStdioServerGone(t *testing.T) {
	refuse := filepath.Join(t.TempDir(), "refuse")
	c := connect(t, stdioConfig(t, "t", map[string]string{"LOOM_MCP_TEST_REFUSE": refuse}), nil)
	os.WriteFile(refuse, nil, 0o644)
	call(t, context.Background(), c.Tools(), "t_crash", `{}`)
	res := call(t, context.Background(), c.Tools(), "t_echo", `{}`)
	for _, want := range []string{`MCP server "t" is gone and could not be started again`, "exited with status 1", "refusing to start"} {
		if !res.IsError || !strings.Contains(res.Content, want) {
			t.Errorf("result %+v does not say %q", res, want)
		}
	}
	// Once the cause is fixed, the next call works again.
	os.Remove(refuse)
	if res := call(t, context.Background(), c.Tools(), "t_echo", `{"text":"back"}`); res.IsError {
		t.Errorf("call after the fix: %+v", res)
	}
}

func TestClientCloseDuringReconnect(t *testing.T) {
	hang := filepath.Join(t.TempDir(), "hang")
	c := connect(t, stdioConfig(t, "t", map[string]string{"LOOM_MCP_TEST_HANG": hang}), &Options{TerminateGrace: 100 * time.Millisecond})
	os.WriteFile(hang, nil, 0o644)
	call(t, context.Background(), c.Tools(), "t_crash", `{}`)
	done := make(chan llm.ToolResult, 1)
	go func() { done <- call(t, context.Background(), c.Tools(), "t_echo", `{}`) }()
	var pid int
	eventually(t, 10*time.Second, "the restarted server did not start", func() bool {
		pid, _ = strconv.Atoi(readFile(hang))
		return pid != 0
	})
	c.Close()
	if alive(pid) {
		t.Errorf("the server %d that was starting still runs after Close", pid)
	}
	if res := <-done; !res.IsError {
		t.Errorf("call cut off by Close: %+v", res)
	}
}

func TestClientStdioListChanged(t *testing.T) {
	c := connect(t, stdioConfig(t, "t", nil), nil)
	if res := call(t, context.Background(), c.Tools(), "t_add_tool", `{}`); res.IsError {
		t.Fatalf("add_tool: %+v", res)
	}
	select {
	case <-c.Changed():
	case <-time.After(10 * time.Second):
		t.Fatal("Changed did not fire after tools/list_changed")
	}
	if res := call(t, context.Background(), c.Tools(), "t_added", `{"text":"new"}`); res.IsError || res.Content != "echo: new" {
		t.Errorf("added tool: %+v", res)
	}
	// Refreshing an unchanged set reports nothing.
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Changed():
		t.Error("Changed fired for a refresh that changed nothing")
	default:
	}
}

func TestConnectErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Connect(ctx, ServerConfig{Name: "x"}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("empty config: %v", err)
	}
	_, err := Connect(ctx, ServerConfig{Name: "x", Command: "/nonexistent/server"}, nil)
	var se *ServerError
	if !errors.As(err, &se) || se.Op != "connect" || !strings.Contains(err.Error(), "/nonexistent/server") {
		t.Errorf("missing command: %v", err)
	}
	stderrOut := &syncWriter{w: new(strings.Builder)}
	_, err = Connect(ctx, ServerConfig{Name: "x", Command: "sh", Args: []string{"-c", "echo no such thing >&2; echo $ONLY_THIS >&2; exit 2"}, Env: map[string]string{"ONLY_THIS": "set"}},
		&Options{Stderr: stderrOut, BaseEnv: []string{"PATH=" + os.Getenv("PATH")}})
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "exited with status 2") || !strings.Contains(err.Error(), "no such thing set") {
		t.Errorf("command that exits: %v", err)
	}
	if got := stderrOut.String(); !strings.Contains(got, "no such thing\nset\n") {
		t.Errorf("Options.Stderr got %q", got)
	}
	_, err = Connect(ctx, ServerConfig{Name: "x", Command: "sh", Args: []string{"-c", "echo not json"}}, nil)
	if !errors.As(err, &se) {
		t.Errorf("command that speaks no MCP: %v", err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	_, err = Connect(ctx, ServerConfig{Name: "x", URL: "http://" + addr + "/mcp"}, nil)
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("nothing listening: %v", err)
	}
	// A server that never answers the handshake is bounded by ConnectTimeout.
	_, err = Connect(ctx, ServerConfig{Name: "x", Command: "sleep", Args: []string{"60"}}, &Options{ConnectTimeout: 200 * time.Millisecond, TerminateGrace: 100 * time.Millisecond})
	if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("silent server: %v", err)
	}
}

// rawServer is a go-sdk server for tests that need what loom tools cannot
// produce (other content, odd names, annotations).
func rawServer(t *testing.T, setup func(*sdk.Server)) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "raw", Version: "1"}, nil)
	setup(s)
	_, url := loopbackServer(t, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	return url
}

func obj() map[string]any { return map[string]any{"type": "object"} }

func TestClientContentAndNames(t *testing.T) {
	png := testimage.Make("png", 1, 1)
	var calledAs []string
	var mu sync.Mutex
	result := func(r *sdk.CallToolResult) sdk.ToolHandler {
		return func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			mu.Lock()
			calledAs = append(calledAs, req.Params.Name)
			mu.Unlock()
			return r, nil
		}
	}
	yes := true
	url := rawServer(t, func(s *sdk.Server) {
		// ADVERSARIAL 36: a name the providers refuse.
		s.AddTool(&sdk.Tool{Name: "fs.read/file", InputSchema: obj(), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
			result(&sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "file body"}}}))
		s.AddTool(&sdk.Tool{Name: "fs_read_file", InputSchema: obj(), Annotations: &sdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: &yes}},
			result(&sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "other"}}}))
		s.AddTool(&sdk.Tool{Name: "mixed", InputSchema: obj()}, result(&sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "before"},
			&sdk.ImageContent{MIMEType: "image/png", Data: png},
			&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")},
			&sdk.ResourceLink{URI: "file:///a.txt", Name: "a", MIMEType: "text/plain", Description: "the a file"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///b.txt", Text: "b text"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///c.bin", MIMEType: "application/octet-stream", Blob: []byte{1, 2, 3}}},
		}}))
		s.AddTool(&sdk.Tool{Name: "structured", InputSchema: obj()}, result(&sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]any{"temp": 21}}))
		s.AddTool(&sdk.Tool{Name: "failing", InputSchema: obj()}, result(&sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "bad input"}}, IsError: true}))
		s.AddTool(&sdk.Tool{Name: "silent-failure", InputSchema: obj()}, result(&sdk.CallToolResult{Content: []sdk.Content{}, IsError: true}))
		s.AddTool(&sdk.Tool{Name: "big", InputSchema: obj()}, result(&sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("é", 1000)}}}))
		s.AddTool(&sdk.Tool{Name: "protocol-error", InputSchema: obj()}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return nil, errors.New("handler exploded")
		})
	})
	c := connect(t, ServerConfig{Name: "srv", URL: url}, &Options{MaxResultBytes: 500})
	tools := c.Tools()
	specs := map[string]llm.ToolSpec{}
	for _, tl := range tools {
		specs[tl.Spec().Name] = tl.Spec()
		if !validNameRE.MatchString(tl.Spec().Name) {
			t.Errorf("invalid exposed name %q", tl.Spec().Name)
		}
	}
	// fs.read/file and fs_read_file collide after sanitizing: the exact one
	// keeps its name, the other gets a hash.
	hashedName := exposedNames([]toolKey{{"srv", "fs.read/file"}, {"srv", "fs_read_file"}})[toolKey{"srv", "fs.read/file"}]
	if s, ok := specs[hashedName]; !ok || s.Effect != llm.EffectReadOnly || s.NeedsApproval {
		t.Errorf("fs.read/file: exposed as %v; want %q, read-only without approval", names(tools), hashedName)
	}
	if s, ok := specs["srv_fs_read_file"]; !ok || s.Effect != llm.EffectIdempotent || !s.NeedsApproval {
		t.Errorf("fs_read_file: %+v; want idempotent with approval", s)
	}
	if s := specs["srv_mixed"]; s.Effect != llm.EffectDestructive || !s.NeedsApproval {
		t.Errorf("a tool without annotations: %+v; want destructive with approval", s)
	}

	ctx := context.Background()
	if res := call(t, ctx, tools, hashedName, `{}`); res.Content != "file body" {
		t.Errorf("%s: %+v", hashedName, res)
	}
	if res := call(t, ctx, tools, "srv_fs_read_file", `{}`); res.Content != "other" {
		t.Errorf("srv_fs_read_file: %+v", res)
	}
	mu.Lock()
	if want := []string{"fs.read/file", "fs_read_file"}; !reflect.DeepEqual(calledAs, want) {
		t.Errorf("the server was called as %q, want %q", calledAs, want)
	}
	mu.Unlock()

	want := "before\n" +
		fmt.Sprintf("[image 1: image/png, %d bytes]\n", len(png)) +
		"[audio: audio/wav, 4 bytes; audio from MCP tools is not passed to the model]\n" +
		"[resource link: file:///a.txt (a), text/plain] the a file\n" +
		"[resource file:///b.txt]\nb text\n" +
		"[resource file:///c.bin: application/octet-stream, 3 bytes of binary data]"
	if res := call(t, ctx, tools, "srv_mixed", `{}`); res.IsError || res.Content != want || !reflect.DeepEqual(res.Images, []llm.Image{{Data: png, MediaType: "image/png"}}) {
		t.Errorf("mixed:\n got %q %+v\nwant %q with the image", res.Content, res.Images, want)
	}
	if res := call(t, ctx, tools, "srv_structured", `{}`); res.Content != `{"temp":21}` {
		t.Errorf("structured: %+v", res)
	}
	if res := call(t, ctx, tools, "srv_failing", `{}`); !res.IsError || res.Content != "bad input" {
		t.Errorf("failing: %+v", res)
	}
	if res := call(t, ctx, tools, "srv_silent-failure", `{}`); !res.IsError || res.Content == "" {
		t.Errorf("silent failure: %+v", res)
	}
	res := call(t, ctx, tools, "srv_big", `{}`)
	if len(res.Content) > 600 || !strings.Contains(res.Content, "bytes cut from the middle") || !strings.HasPrefix(res.Content, "éé") || !strings.HasSuffix(res.Content, "éé") || strings.ContainsRune(res.Content, '\uFFFD') {
		t.Errorf("big: %d bytes: %.80q", len(res.Content), res.Content)
	}
	if res := call(t, ctx, tools, "srv_protocol-error", `{}`); !res.IsError || !strings.Contains(res.Content, "handler exploded") {
		t.Errorf("protocol error: %+v", res)
	}
	// The session survives all of that.
	if res := call(t, ctx, tools, "srv_fs_read_file", `{}`); res.IsError {
		t.Errorf("after errors: %+v", res)
	}
}

func TestClientHTTP(t *testing.T) {
	var tools []tool.Tool
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		tools = append(tools, echoTool(n))
	}
	started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	tools = append(tools, newTool("block", llm.EffectReadOnly, func(ctx context.Context, _ json.RawMessage) (llm.ToolResult, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			cancelled <- struct{}{}
		case <-time.After(time.Minute):
		}
		return llm.ToolResult{Content: "done"}, nil
	}))
	s, err := NewServer(tools, &ServeOptions{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var auth []string
	h := s.Handler(nil)
	_, url := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	c := connect(t, ServerConfig{Name: "h", URL: url, Headers: map[string]string{"Authorization": "Bearer secret"}}, nil)

	// Pagination: 6 tools in pages of 2.
	if got, want := names(c.Tools()), []string{"h_a", "h_b", "h_block", "h_c", "h_d", "h_e"}; !reflect.DeepEqual(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
	if res := call(t, context.Background(), c.Tools(), "h_c", `{"text":"x"}`); res.Content != "echo: x" {
		t.Errorf("call: %+v", res)
	}
	mu.Lock()
	for _, a := range auth {
		if a != "Bearer secret" {
			t.Errorf("a request had Authorization %q", a)
		}
	}
	if len(auth) == 0 {
		t.Error("no request reached the server")
	}
	mu.Unlock()

	// Cancellation reaches the tool on the server.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan llm.ToolResult, 1)
	go func() { done <- call(t, ctx, c.Tools(), "h_block", `{}`) }()
	<-started
	cancel()
	if res := <-done; !res.IsError || !strings.Contains(res.Content, "cancelled") {
		t.Errorf("cancelled: %+v", res)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Error("the server's tool was not cancelled")
	}

	// tools/list_changed refreshes the set.
	if err := s.SetTools(append(tools, echoTool("f"))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Changed():
	case <-time.After(10 * time.Second):
		t.Fatal("Changed did not fire")
	}
	if res := call(t, context.Background(), c.Tools(), "h_f", `{"text":"f"}`); res.Content != "echo: f" {
		t.Errorf("new tool: %+v", res)
	}
}

func TestClientHTTPServerRestart(t *testing.T) {
	s, err := NewServer([]tool.Tool{echoTool("echo")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	serve := func(l net.Listener) *http.Server {
		hs := &http.Server{Handler: s.Handler(nil)}
		go hs.Serve(l)
		return hs
	}
	hs := serve(l)
	c := connect(t, ServerConfig{Name: "h", URL: "http://" + addr + "/mcp"}, &Options{ConnectTimeout: 5 * time.Second})
	if res := call(t, context.Background(), c.Tools(), "h_echo", `{"text":"1"}`); res.IsError {
		t.Fatalf("first call: %+v", res)
	}
	hs.Close()
	res := call(t, context.Background(), c.Tools(), "h_echo", `{"text":"2"}`)
	if !res.IsError || !strings.Contains(res.Content, `MCP server "h"`) {
		t.Errorf("call while the server is down: %+v", res)
	}
	// Down for good: the next call says the server is gone.
	res = call(t, context.Background(), c.Tools(), "h_echo", `{"text":"3"}`)
	if !res.IsError || !strings.Contains(res.Content, "is gone") {
		t.Errorf("second call while down: %+v", res)
	}
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	hs = serve(l)
	defer hs.Close()
	if res := call(t, context.Background(), c.Tools(), "h_echo", `{"text":"4"}`); res.IsError || res.Content != "echo: 4" {
		t.Errorf("call after the server came back: %+v", res)
	}
}

func TestGroup(t *testing.T) {
	sa, _ := NewServer([]tool.Tool{echoTool("b_c"), echoTool("x")}, nil)
	sb, _ := NewServer([]tool.Tool{echoTool("c")}, nil)
	_, ua := loopbackServer(t, sa.Handler(nil))
	_, ub := loopbackServer(t, sb.Handler(nil))
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String() + "/mcp"
	l.Close()

	g, err := ConnectAll(context.Background(), []ServerConfig{{Name: "a", URL: ua}, {Name: "a_b", URL: ub}, {Name: "down", URL: dead}}, nil)
	defer g.Close()
	var se *ServerError
	if !errors.As(err, &se) || se.Server != "down" {
		t.Fatalf("got %v, want a ServerError for server down", err)
	}
	if len(g.Clients()) != 2 {
		t.Fatalf("%d clients, want the 2 that connected", len(g.Clients()))
	}
	// a_b_c is the exact name of two tools (a's b_c and a_b's c): both are
	// hashed. a_x stays.
	tools := g.Tools()
	seen := map[string]bool{}
	for _, tl := range tools {
		n := tl.Spec().Name
		if seen[n] || !validNameRE.MatchString(n) {
			t.Errorf("bad or duplicate name %q in %v", n, names(tools))
		}
		seen[n] = true
	}
	if !seen["a_x"] || seen["a_b_c"] || len(tools) != 3 {
		t.Errorf("names %v: want a_x and two hashed a_b_c", names(tools))
	}
	if _, err := tool.NewSet(tools...); err != nil {
		t.Errorf("the group's tools do not make a set: %v", err)
	}
	// Each hashed tool still reaches its own server.
	want := map[toolKey]string{{"a", "b_c"}: "echo: 1", {"a_b", "c"}: "echo: 1"}
	names := exposedNames([]toolKey{{"a", "b_c"}, {"a", "x"}, {"a_b", "c"}})
	for k, w := range want {
		if res := call(t, context.Background(), tools, names[k], `{"text":"1"}`); res.Content != w {
			t.Errorf("%v: %+v", k, res)
		}
	}
	// A change on one server is a change of the group.
	sb.SetTools([]tool.Tool{echoTool("c"), echoTool("d")})
	select {
	case <-g.Changed():
	case <-time.After(10 * time.Second):
		t.Fatal("the group did not report the change")
	}
	if len(g.Tools()) != 4 {
		t.Errorf("tools after the change: %v", names)
	}

	if _, err := ConnectAll(context.Background(), []ServerConfig{{Name: "a", URL: ua}, {Name: "a", URL: ub}}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("duplicate server names: %v", err)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (w *syncWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.String()
}
