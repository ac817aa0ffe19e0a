package anthropic

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
)

// BenchmarkEncode is the adapter's one-pass encoding of a request with
// 200 prior messages of about 1 KB (history check included).
func BenchmarkEncode(b *testing.B) {
	text := strings.Repeat("Some earlier reasoning about the code base. ", 22)
	msgs := []llm.Message{llm.UserText("Start.")}
	for i := 0; len(msgs) < 201; i++ {
		id := fmt.Sprintf("toolu_%03d", i)
		msgs = append(msgs,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text{Text: text[:900]}, llm.ToolCall{ID: id, Name: "read_file", Arguments: `{"path":"a.go"}`}}},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: id, Content: text}}})
	}
	m := New(Config{Model: "claude"})
	req := llm.Request{System: "You are a coding agent.", Messages: msgs}
	body, err := m.encodeRequest(req, false, opGenerate)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.encodeRequest(req, false, opGenerate); err != nil {
			b.Fatal(err)
		}
	}
}
