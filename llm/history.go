package llm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrHistory is matched (errors.Is) by every *HistoryError.
var ErrHistory = errors.New("llm: invalid history")

// HistoryError says where a history breaks the pairing rule every provider
// enforces: each tool call is answered by exactly one result in the very
// next message, and every result answers a call of the message before it.
type HistoryError struct {
	Index  int    // the message at fault
	Reason string // what is wrong there
}

func (e *HistoryError) Error() string {
	return fmt.Sprintf("llm: invalid history at message %d: %s (a provider would reject this request; close open calls with results first)", e.Index, e.Reason)
}

// Is makes errors.Is(err, ErrHistory) match.
func (e *HistoryError) Is(target error) bool { return target == ErrHistory }

// CheckHistory returns a *HistoryError when msgs break the pairing rule:
// a tool call left unanswered (also at the end of the history), answered
// twice, or answered by a result in any message but the next one; a result
// for an unknown call; a duplicate call id within a message; a call without
// an id; a result in an assistant message or a call in a user message.
func CheckHistory(msgs []Message) error {
	var pending map[string]int // call ids of the previous assistant message
	for i, m := range msgs {
		switch m.Role {
		case RoleAssistant:
			if len(pending) > 0 {
				return &HistoryError{Index: i, Reason: "tool calls " + idList(pending) + " of the previous message have no results"}
			}
			pending = nil
			for _, p := range m.Parts {
				switch p := p.(type) {
				case ToolCall:
					if p.ID == "" {
						return &HistoryError{Index: i, Reason: fmt.Sprintf("tool call %q has no id", p.Name)}
					}
					if pending == nil {
						pending = make(map[string]int)
					}
					if pending[p.ID] > 0 {
						return &HistoryError{Index: i, Reason: fmt.Sprintf("tool call id %q is used twice", p.ID)}
					}
					pending[p.ID]++
				case ToolResult:
					return &HistoryError{Index: i, Reason: fmt.Sprintf("an assistant message holds a result for %q", p.CallID)}
				}
			}
		case RoleUser:
			for _, p := range m.Parts {
				switch p := p.(type) {
				case ToolResult:
					if pending[p.CallID] == 0 {
						return &HistoryError{Index: i, Reason: fmt.Sprintf("result for %q answers no open call of the previous message", p.CallID)}
					}
					delete(pending, p.CallID)
				case ToolCall:
					return &HistoryError{Index: i, Reason: fmt.Sprintf("a user message holds a tool call %q", p.ID)}
				}
			}
			if len(pending) > 0 {
				return &HistoryError{Index: i, Reason: "tool calls " + idList(pending) + " of the previous message have no results"}
			}
			pending = nil
		default:
			return &HistoryError{Index: i, Reason: fmt.Sprintf("unknown role %q", m.Role)}
		}
	}
	if len(pending) > 0 {
		return &HistoryError{Index: len(msgs) - 1, Reason: "tool calls " + idList(pending) + " at the end of the history have no results"}
	}
	return nil
}

func idList(ids map[string]int) string {
	list := make([]string, 0, len(ids))
	for id := range ids {
		list = append(list, fmt.Sprintf("%q", id))
	}
	slices.Sort(list) // a stable message
	return "[" + strings.Join(list, ", ") + "]"
}
