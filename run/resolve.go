package run

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loomkit/loom/llm"
)

// resolveStep presents the invalid call at the scan position.
func (r *Run) resolveStep() ResolveToolCall {
	t := r.mt
	c := t.call(t.next)
	return ResolveToolCall{
		Turn:       r.turn,
		Call:       c,
		Allowed:    r.rules.allowedList,
		Suggestion: suggest(c.Name, r.rules.allowedList),
	}
}

// resolve applies the driver's decision about the invalid call at the scan
// position.
func (r *Run) resolve(res Resolution) (state, error) {
	t := r.mt
	c := t.call(t.next)
	unknown := func(name, reason string) error {
		return &UnknownToolError{Name: name, CallID: c.ID, Allowed: slices.Clone(r.rules.allowedList), Reason: reason}
	}
	switch res := res.(type) {
	case Fail:
		return 0, unknown(c.Name, "the call was resolved with Fail")
	case Stop:
		return 0, &StoppedError{Reason: res.Reason}
	case Retry:
		if r.retries >= r.cfg.MaxInvalidRetries {
			return 0, unknown(c.Name, fmt.Sprintf("Retry refused: the run's %d invalid-call retries are spent (raise Config.MaxInvalidRetries)", r.cfg.MaxInvalidRetries))
		}
		feedback := res.Feedback
		if feedback == "" {
			feedback = r.notAllowedText(c.Name)
		}
		r.hist = append(r.hist, t.orig, r.answerAll(t, t.next, feedback))
		r.retries++
		r.mt = nil
		return statePreparing, nil
	case Repair:
		if !r.rules.allowed[res.Name] {
			return 0, unknown(res.Name, fmt.Sprintf("Repair renamed %q to %q, which is not allowed on this turn either", c.Name, res.Name))
		}
		c.Name = res.Name
		t.setCall(t.next, c)
		return r.scan(), nil
	case Skip:
		if r.cfg.ToolChoice.Mode == llm.ToolNone {
			return 0, unknown(c.Name, "Skip is refused under tool choice none")
		}
		reason := res.Reason
		if reason == "" {
			reason = r.notAllowedText(c.Name)
		}
		t.pre[t.next] = &llm.ToolResult{CallID: c.ID, Name: c.Name, Content: reason, IsError: true}
		t.skipped = true
		t.next = len(t.calls)
		return r.settle(), nil
	case nil:
		return 0, r.protocolError(stateResolving, inResolve, "the resolution is nil; give Fail{}, Retry{...}, Repair{...}, Skip{...} or Stop{...}")
	}
	return 0, r.protocolError(stateResolving, inResolve, fmt.Sprintf("unknown resolution %T", res))
}

// answerAll builds the user message that answers every call of t as
// committed in orig: call inv with text, calls with a preresolved result
// with it, the others with NotExecuted.
func (r *Run) answerAll(t *modelTurn, inv int, text string) llm.Message {
	parts := make([]llm.Part, len(t.calls))
	for i, at := range t.calls {
		c := t.orig.Parts[at].(llm.ToolCall)
		res := llm.ToolResult{CallID: c.ID, Name: c.Name, Content: NotExecuted, IsError: true}
		switch {
		case i == inv:
			res.Content = text
		case t.pre[i] != nil:
			res.Content = t.pre[i].Content
		}
		parts[i] = res
	}
	return llm.Message{Role: llm.RoleUser, Parts: parts}
}

func (r *Run) notAllowedText(name string) string {
	if len(r.rules.allowedList) == 0 {
		return fmt.Sprintf("Tool %q is not available: no tool may be called on this turn.", name)
	}
	return fmt.Sprintf("Tool %q is not available. Available tools: %s.", name, strings.Join(r.rules.allowedList, ", "))
}

// suggest returns the name in names that name most likely meant: equal up
// to case and '-' versus '_', or at most two edits apart after that
// folding, when exactly one name is closest. Otherwise it returns "".
func suggest(name string, names []string) string {
	const maxDistance = 2
	folded := fold(name)
	best, bestDist, ties := "", maxDistance+1, 0
	for _, n := range names {
		d := distance(folded, fold(n), maxDistance)
		switch {
		case d < bestDist:
			best, bestDist, ties = n, d, 1
		case d == bestDist:
			ties++
		}
	}
	if ties != 1 {
		return ""
	}
	return best
}

func fold(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), "-", "_")
}

// distance is the Levenshtein distance between a and b (in runes), or
// limit+1 once it is sure to exceed limit.
func distance(a, b string, limit int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return min(prev[len(rb)], limit+1)
}
