package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/loomkit/loom/llm"
)

// DefaultMaxResult is the size in bytes above which [Func] tools cut their
// results (about 7,500 tokens of English text).
const DefaultMaxResult = 30_000

// TextResult returns a successful result carrying s, with invalid UTF-8
// replaced by U+FFFD.
func TextResult(s string) llm.ToolResult {
	return llm.ToolResult{Content: validUTF8(s)}
}

// ErrorResult returns a failed result carrying msg, with invalid UTF-8
// replaced by U+FFFD.
func ErrorResult(msg string) llm.ToolResult {
	return llm.ToolResult{Content: validUTF8(msg), IsError: true}
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Truncate returns s unchanged when it is at most max bytes long, and
// otherwise its head and its tail joined by a line saying how many bytes
// were cut. The result is at most max bytes plus the marker's length, and is
// cut at rune boundaries, so valid UTF-8 stays valid. A max of zero or less
// means no limit. It sees text only; see [LimitResults] for a result's
// images.
//
// Head and tail are kept because both ends matter: the start of a file or
// log says what it is, the end of a build says whether it failed.
func Truncate(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	head := runeStart(s, max/2)
	tail := runeStartAfter(s, len(s)-(max-head))
	if tail < head {
		tail = head
	}
	cut := tail - head
	return s[:head] + fmt.Sprintf("\n\n[... %d bytes cut; %d of %d shown. Ask for less, e.g. a narrower range or pattern ...]\n\n", cut, len(s)-cut, len(s)) + s[tail:]
}

// runeStart returns the largest index <= i that begins a rune of s.
func runeStart(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	if i <= 0 {
		return 0
	}
	j := i
	for j > 0 && !utf8.RuneStart(s[j]) {
		j--
	}
	return j
}

// runeStartAfter returns the smallest index >= i that begins a rune of s
// (or len(s)).
func runeStartAfter(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// LimitResults returns middleware that cuts the content of every result of
// a tool to max bytes with [Truncate]. Only the text is cut and counted: a
// result's images pass unchanged, since cutting bytes out of a picture
// breaks it and the providers bound images by their own limits (MCP tools
// cap each at mcp.MaxImageBytes). The wrapped tool keeps the approval
// decisions of the original.
func LimitResults(max int) Middleware {
	return func(t Tool) Tool {
		return Wrap(t, func(ctx context.Context, args json.RawMessage) (llm.ToolResult, error) {
			r, err := t.Call(ctx, args)
			r.Content = Truncate(r.Content, max)
			return r, err
		})
	}
}
