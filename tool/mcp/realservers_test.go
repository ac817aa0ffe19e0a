package mcp

// Tests against the reference MCP servers from npm, installed by
// testenv/install.sh. They skip when those are missing, except under
// CI=true, where they fail.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
)

func everythingConfig(t *testing.T) ServerConfig {
	t.Helper()
	node := node22(t)
	script := filepath.Join(testenvDir(t), "@modelcontextprotocol", "server-everything", "dist", "index.js")
	return ServerConfig{Name: "everything", Command: node, Args: []string{script, "stdio"}}
}

func filesystemConfig(t *testing.T, root string) ServerConfig {
	t.Helper()
	node := node22(t)
	script := filepath.Join(testenvDir(t), "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	return ServerConfig{Name: "fs", Command: node, Args: []string{script, root}}
}

// serverPid returns the pid of c's current stdio server.
func serverPid(t *testing.T, c *Client) int {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		t.Fatal("no server process")
	}
	return c.proc.pid()
}

func specsByName(c *Client) map[string]llm.ToolSpec {
	m := map[string]llm.ToolSpec{}
	for _, tl := range c.Tools() {
		m[tl.Spec().Name] = tl.Spec()
	}
	return m
}

func TestEverythingList(t *testing.T) {
	c := connect(t, everythingConfig(t), nil)
	specs := specsByName(c)
	want := map[string]struct {
		effect   llm.Effect
		approval bool
	}{
		"everything_echo":                           {llm.EffectReadOnly, false},
		"everything_get-sum":                        {llm.EffectReadOnly, false},
		"everything_trigger-long-running-operation": {llm.EffectReadOnly, false},
		"everything_gzip-file-as-resource":          {llm.EffectIdempotent, true},
		"everything_toggle-simulated-logging":       {llm.EffectDestructive, true},
	}
	for name, w := range want {
		s, ok := specs[name]
		if !ok {
			t.Errorf("no tool %s among %v", name, names(c.Tools()))
			continue
		}
		if s.Effect != w.effect || s.NeedsApproval != w.approval {
			t.Errorf("%s: effect %v approval %v, want %v %v", name, s.Effect, s.NeedsApproval, w.effect, w.approval)
		}
	}
	for name, s := range specs {
		if !validNameRE.MatchString(name) {
			t.Errorf("invalid name %q", name)
		}
		if s.Description == "" || !strings.HasPrefix(string(s.Schema), "{") {
			t.Errorf("%s: description %q schema %s", name, s.Description, s.Schema)
		}
	}
	if s := specs["everything_echo"]; !strings.Contains(string(s.Schema), `"message"`) {
		t.Errorf("echo's schema %s lost its properties", s.Schema)
	}
}

func TestEverythingCall(t *testing.T) {
	c := connect(t, everythingConfig(t), nil)
	ctx := context.Background()
	tools := c.Tools()
	if res := call(t, ctx, tools, "everything_echo", `{"message":"hi"}`); res.IsError || res.Content != "Echo: hi" {
		t.Errorf("echo: %+v", res)
	}
	if res := call(t, ctx, tools, "everything_get-sum", `{"a":2,"b":40}`); res.IsError || !strings.Contains(res.Content, "42") {
		t.Errorf("get-sum: %+v", res)
	}
	// The image arrives as an image the model can be given, and as a
	// line in the text between the server's two texts.
	if res := call(t, ctx, tools, "everything_get-tiny-image", `{}`); res.IsError || len(res.Images) != 1 {
		t.Errorf("get-tiny-image: error %v, %d images; text %q", res.IsError, len(res.Images), res.Content)
	} else {
		img := res.Images[0]
		if img.MediaType != "image/png" || !bytes.HasPrefix(img.Data, []byte("\x89PNG\r\n\x1a\n")) || img.URL != "" {
			t.Errorf("get-tiny-image: image %s, %d bytes, starting %q", img.MediaType, len(img.Data), img.Data[:min(8, len(img.Data))])
		}
		line := fmt.Sprintf("\n[image 1: image/png, %d bytes]\n", len(img.Data))
		if !strings.Contains(res.Content, line) || !strings.HasPrefix(res.Content, "Here's the image") {
			t.Errorf("get-tiny-image: text %q lacks %q", res.Content, line)
		}
		if err := llm.CheckImages([]llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{res}}}); err != nil {
			t.Error(err)
		}
	}
	if res := call(t, ctx, tools, "everything_get-structured-content", `{"location":"New York"}`); res.IsError || !strings.Contains(res.Content, "temperature") {
		t.Errorf("get-structured-content: %+v", res)
	}
	if res := call(t, ctx, tools, "everything_get-resource-links", `{"count":2}`); res.IsError || !strings.Contains(res.Content, "[resource link: demo://") {
		t.Errorf("get-resource-links: %+v", res)
	}
	// Arguments the server's schema refuses: an error result from the
	// client's own check of that schema, and the session goes on.
	if res := call(t, ctx, tools, "everything_get-sum", `{"a":"two","b":40}`); !res.IsError || !strings.HasPrefix(res.Content, "Invalid arguments for everything_get-sum: at a: ") {
		t.Errorf("get-sum with a string: %+v", res)
	}
	if res := call(t, ctx, tools, "everything_echo", `{"message":"still"}`); res.IsError {
		t.Errorf("echo after an error: %+v", res)
	}
}

func TestEverythingCancellation(t *testing.T) {
	c := connect(t, everythingConfig(t), nil)
	const duration = 60 // seconds the operation would run
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan llm.ToolResult, 1)
	start := time.Now()
	go func() {
		done <- call(t, ctx, c.Tools(), "everything_trigger-long-running-operation", `{"duration":60,"steps":60}`)
	}()
	time.Sleep(300 * time.Millisecond) // let the request reach the server
	cancel()
	res := <-done
	if !res.IsError || !strings.Contains(res.Content, "cancelled") {
		t.Errorf("cancelled call: %+v", res)
	}
	if elapsed := time.Since(start); elapsed > duration*time.Second/2 {
		t.Errorf("the cancelled call returned after %v, as if it waited for the operation", elapsed)
	}
	if res := call(t, context.Background(), c.Tools(), "everything_echo", `{"message":"after"}`); res.IsError {
		t.Errorf("echo after cancellation: %+v", res)
	}
}

func TestEverythingCrash(t *testing.T) {
	c := connect(t, everythingConfig(t), nil)
	pid := serverPid(t, c)
	done := make(chan llm.ToolResult, 1)
	go func() {
		done <- call(t, context.Background(), c.Tools(), "everything_trigger-long-running-operation", `{"duration":60,"steps":60}`)
	}()
	time.Sleep(300 * time.Millisecond) // let the request reach the server
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if !res.IsError || !strings.Contains(res.Content, "went away during the call") || !strings.Contains(res.Content, "killed") {
		t.Errorf("killed mid-call: %+v", res)
	}
	if res := call(t, context.Background(), c.Tools(), "everything_echo", `{"message":"restarted"}`); res.IsError || res.Content != "Echo: restarted" {
		t.Fatalf("echo after the crash: %+v", res)
	}
	next := serverPid(t, c)
	if next == pid {
		t.Errorf("the server was not restarted")
	}
	c.Close()
	if alive(next) {
		t.Errorf("server %d still runs after Close", next)
	}
}

func TestFilesystemServer(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("alpha\n"), 0o644)
	c := connect(t, filesystemConfig(t, root), nil)
	specs := specsByName(c)
	for name, effect := range map[string]llm.Effect{
		"fs_read_text_file": llm.EffectReadOnly,
		"fs_write_file":     llm.EffectIdempotent,
		"fs_edit_file":      llm.EffectDestructive,
	} {
		if s, ok := specs[name]; !ok || s.Effect != effect || s.NeedsApproval != (effect != llm.EffectReadOnly) {
			t.Errorf("%s: %+v, want effect %v", name, s, effect)
		}
	}
	ctx := context.Background()
	tools := c.Tools()
	if res := call(t, ctx, tools, "fs_read_text_file", `{"path":"`+filepath.Join(root, "a.txt")+`"}`); res.IsError || !strings.Contains(res.Content, "alpha") {
		t.Errorf("read: %+v", res)
	}
	if res := call(t, ctx, tools, "fs_read_text_file", `{"path":"/etc/passwd"}`); !res.IsError || !strings.Contains(strings.ToLower(res.Content), "denied") {
		t.Errorf("read outside the root: %+v", res)
	}
	if res := call(t, ctx, tools, "fs_read_text_file", `{"path":"`+filepath.Join(root, "missing.txt")+`"}`); !res.IsError {
		t.Errorf("read of a missing file: %+v", res)
	}
	if res := call(t, ctx, tools, "fs_write_file", `{"path":"`+filepath.Join(root, "b.txt")+`","content":"beta"}`); res.IsError {
		t.Errorf("write: %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(root, "b.txt")); err != nil || string(b) != "beta" {
		t.Errorf("written file: %q, %v", b, err)
	}
}
