package llm

import (
	"errors"
	"strings"
	"testing"
)

func call(id string) Part   { return ToolCall{ID: id, Name: "t"} }
func result(id string) Part { return ToolResult{CallID: id, Content: "ok"} }
func asst(ps ...Part) Message {
	return Message{Role: RoleAssistant, Parts: ps}
}
func user(ps ...Part) Message { return Message{Role: RoleUser, Parts: ps} }

func TestCheckHistory(t *testing.T) {
	cases := []struct {
		name    string
		msgs    []Message
		wantErr string // "" for valid
		index   int
	}{
		{"empty", nil, "", 0},
		{"plain chat", []Message{UserText("hi"), AssistantText("hello")}, "", 0},
		{"paired in any order", []Message{UserText("go"), asst(call("a"), call("b")), user(result("b"), result("a"), Text{Text: "note"})}, "", 0},
		{"unanswered at end", []Message{UserText("go"), asst(call("a"))}, `"a"`, 1},
		{"partly answered", []Message{asst(call("a"), call("b")), user(result("a"))}, `["b"]`, 1},
		{"answered late", []Message{asst(call("a")), UserText("wait"), user(result("a"))}, `["a"]`, 1},
		{"orphan result", []Message{UserText("go"), user(result("x"))}, `"x" answers no open call`, 1},
		{"answered twice", []Message{asst(call("a")), user(result("a"), result("a"))}, `"a" answers no open call`, 1},
		{"duplicate call ids", []Message{asst(call("a"), call("a"))}, "used twice", 0},
		{"call without id", []Message{asst(ToolCall{Name: "t"})}, "has no id", 0},
		{"result in assistant", []Message{asst(result("a"))}, "assistant message holds a result", 0},
		{"call in user", []Message{user(call("a"))}, "user message holds a tool call", 0},
		{"assistant after open calls", []Message{asst(call("a")), AssistantText("x")}, `["a"]`, 1},
		{"unknown role", []Message{{Role: "tool"}}, "unknown role", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckHistory(c.msgs)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("valid history refused: %v", err)
				}
				return
			}
			var he *HistoryError
			if !errors.As(err, &he) || !errors.Is(err, ErrHistory) {
				t.Fatalf("err = %v, want *HistoryError", err)
			}
			if !strings.Contains(err.Error(), c.wantErr) || he.Index != c.index {
				t.Fatalf("err = %v (index %d), want %q at %d", err, he.Index, c.wantErr, c.index)
			}
		})
	}
}
