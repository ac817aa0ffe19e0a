package mcp

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/loomkit/loom/tool"
)

// TestCloseLeavesNoGoroutines connects, calls and closes, over stdio and
// HTTP, and checks that the goroutines it started are gone.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	s, err := NewServer([]tool.Tool{echoTool("echo")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs, url := loopbackServer(t, s.Handler(nil))
	stdio := stdioConfig(t, "t", nil)
	before := runtime.NumGoroutine()
	for i := range 3 {
		for _, cfg := range []ServerConfig{stdio, {Name: "h", URL: url}} {
			c, err := Connect(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res := call(t, context.Background(), c.Tools(), cfg.Name+"_echo", fmt.Sprintf(`{"text":"%d"}`, i)); res.IsError {
				t.Fatal(res.Content)
			}
			c.Close()
		}
	}
	hs.CloseClientConnections()
	eventually(t, 10*time.Second, "goroutines left after Close", func() bool {
		return runtime.NumGoroutine() <= before
	})
}
