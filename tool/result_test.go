package tool_test

import (
	"strings"
	"testing"
	"unicode/utf8"

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
