package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

func TestTruncate(t *testing.T) {
	s := "HEAD" + strings.Repeat("x", 1000) + "TAIL"
	got := tool.Truncate(s, 100)
	if !strings.HasPrefix(got, "HEAD") || !strings.HasSuffix(got, "TAIL") {
		t.Errorf("head or tail lost: %q", got)
	}
	if !strings.Contains(got, "908 bytes cut; 100 of 1008 shown") {
		t.Errorf("marker wrong: %q", got)
	}
	if tool.Truncate(s, len(s)) != s || tool.Truncate(s, 0) != s {
		t.Error("short enough input changed")
	}
}

func FuzzTruncate(f *testing.F) {
	f.Add("héllo wörld, ünïcode ✓ 🎉", 7)
	f.Add(strings.Repeat("🎉", 100), 5)
	f.Add("abc", 1)
	f.Fuzz(func(t *testing.T, s string, max int) {
		got := tool.Truncate(s, max)
		if max <= 0 || len(s) <= max {
			if got != s {
				t.Fatalf("changed input within limit")
			}
			return
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("valid UTF-8 became invalid: %q", got)
		}
		i := strings.Index(got, "\n\n[... ")
		j := strings.Index(got, " ...]\n\n")
		if i < 0 || j < 0 {
			t.Fatalf("no marker in %q", got)
		}
		head, tail := got[:i], got[j+len(" ...]\n\n"):]
		if len(head)+len(tail) > max {
			t.Fatalf("kept %d bytes, max %d", len(head)+len(tail), max)
		}
		if !strings.HasPrefix(s, head) || !strings.HasSuffix(s, tail) {
			t.Fatalf("head/tail are not the input's")
		}
	})
}

// Cutting a result's text leaves its images whole, and they do not count
// towards the limit.
func TestLimitResultsKeepsImages(t *testing.T) {
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0xff}, 5000)...)
	images := []llm.Image{{Data: png, MediaType: "image/png"}, {URL: "https://example.com/a.png"}}
	for _, content := range []string{"short", strings.Repeat("é", 500)} {
		shot := tool.Func("shot", "", func(context.Context, struct{}) (llm.ToolResult, error) {
			return llm.ToolResult{Content: content, Images: images}, nil
		}, &tool.FuncOptions[struct{}]{MaxResult: -1})
		tl := tool.Chain(shot, tool.LimitResults(100))
		res, err := tl.Call(context.Background(), json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Images, images) {
			t.Errorf("%d bytes of text: images changed: %d of them", len(content), len(res.Images))
		}
		if cut := strings.Contains(res.Content, "bytes cut"); cut != (len(content) > 100) || !utf8.ValidString(res.Content) {
			t.Errorf("%d bytes of text: cut %v, text %q", len(content), cut, res.Content)
		}
	}
}
