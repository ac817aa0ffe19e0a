package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/run"
)

func TestSanitize(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text\n\twith tab", "plain text\n\twith tab"},
		{"windows\r\nline", "windows\nline"},
		{"\x1b[31mred\x1b[0m", "?[31mred?[0m"},
		{"bell\x07 and del\x7f", "bell? and del?"},
		{"c1 \u009b2J csi", "c1 ?2J csi"},
		{"héllo ✓", "héllo ✓"},
	} {
		if got := Sanitize(c.in); got != c.want {
			t.Errorf("Sanitize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "a\x1bb", "\r\n", "\u009b", "ok\n", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Sanitize(s)
		for _, r := range out {
			if isControl(r) || r == '\r' {
				t.Fatalf("Sanitize(%q) = %q keeps control %U", s, out, r)
			}
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("Sanitize(%q) = %q is not valid UTF-8", s, out)
		}
		if line := firstLine(s, 40); strings.ContainsAny(line, "\n\r") || len(line) > 40+len("…")+len(" …") {
			t.Fatalf("firstLine(%q) = %q", s, line)
		}
	})
}

func TestCallSummary(t *testing.T) {
	for _, c := range []struct {
		name, args, want string
	}{
		{"bash", `{"command":"go test ./..."}`, ": go test ./..."},
		{"bash", `{"command":"make\nmake install"}`, ": make …"},
		{"edit_file", `{"path":"main.go","old_string":"a","new_string":"b"}`, ": main.go"},
		{"list_dir", `{}`, ": ."},
		{"grep", `{"pattern":"TODO","path":"src"}`, ": TODO in src"},
		{"web_fetch", `{"url":"https://go.dev"}`, ": https://go.dev"},
		{"srv_tool", `{"b":1,"a":"x"}`, `: {"a":"x","b":1}`},
		{"srv_tool", `{}`, ""},
		{"read_file", `{"path":`, `: {"path": (not valid JSON)`},
		{"bash", `{"command":"echo \u001b[2J"}`, ": echo ?[2J"},
	} {
		got := CallSummary(llm.ToolCall{Name: c.name, Arguments: c.args})
		if got != c.want {
			t.Errorf("CallSummary(%s %s) = %q, want %q", c.name, c.args, got, c.want)
		}
	}
}

func TestResultSummary(t *testing.T) {
	for _, c := range []struct {
		name    string
		res     llm.ToolResult
		want    string
		isError bool
	}{
		{"bash", llm.ToolResult{Content: "ok\n[exit code 0]"}, "exit 0: ok", false},
		{"bash", llm.ToolResult{Content: "a\nb\nc\n[exit code 0]\n"}, "exit 0, 3 lines of output", false},
		{"bash", llm.ToolResult{Content: "[exit code 0]"}, "exit 0, no output", false},
		{"bash", llm.ToolResult{Content: "FAIL x\n[exit code 1]", IsError: true}, "FAIL x …", true},
		{"read_file", llm.ToolResult{Content: "     1\tpackage main\n     2\t\n"}, "read 2 lines", false},
		{"glob", llm.ToolResult{Content: "a.go\nb.go\nc.go"}, "3 paths: a.go …", false},
		{"list_dir", llm.ToolResult{Content: ". (2 entries):\nmain.go\ngo.mod\n"}, "2 entries", false},
		{"srv_tool", llm.ToolResult{Content: "first\nsecond\nthird"}, "first (+2 lines)", false},
		{"write_file", llm.ToolResult{Content: ""}, "(empty)", false},
	} {
		if got := ResultSummary(c.name, c.res); got != c.want {
			t.Errorf("ResultSummary(%s, %q) = %q, want %q", c.name, c.res.Content, got, c.want)
		}
	}
}

func TestArguments(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{`{"path":"a"}`, `{"path":"a"}`},
		{``, `{}`},
		{`{"a":1,}`, `"{\"a\":1,}"`},
		{`[1,2]`, `"[1,2]"`},
	} {
		if got := string(Arguments(llm.ToolCall{Arguments: c.args})); got != c.want {
			t.Errorf("Arguments(%q) = %s, want %s", c.args, got, c.want)
		}
	}
}

func TestKind(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrInterrupted)
	for _, c := range []struct {
		err  error
		want string
	}{
		{&agent.RunError{Err: &model.Error{Kind: model.KindAuth, Status: 401}}, "auth"},
		{fmt.Errorf("x: %w", &model.Error{Kind: model.KindRateLimited}), "rate_limited"},
		{&agent.RunError{Err: &run.MaxTurnsError{MaxTurns: 3}}, "max_turns"},
		{&agent.RunError{Err: context.Canceled}, "interrupted"},
		{context.Cause(ctx), "interrupted"},
		{&agent.BudgetError{Limit: "cost"}, "budget"},
		{&agent.CheckpointError{Op: "x", Err: errors.New("disk full")}, "checkpoint"},
		{&agent.ConfigError{Field: "Model"}, "config"},
		{errors.New("something"), "error"},
	} {
		if got := Kind(c.err); got != c.want {
			t.Errorf("Kind(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	if !errors.Is(ErrInterrupted, context.Canceled) {
		t.Error("ErrInterrupted does not match context.Canceled: an interrupted run would be failed for good")
	}
}

func TestMessage(t *testing.T) {
	err := &agent.RunError{RunID: "run_1", Err: &run.MaxTurnsError{MaxTurns: 7}}
	if got := Message(err); !strings.Contains(got, "7 model calls") || strings.Contains(got, "Config.MaxTurns") || strings.Contains(got, "run_1") {
		t.Errorf("Message = %q", got)
	}
	if got := Message(&agent.RunError{RunID: "run_1", Err: errors.New("boom")}); got != "boom" {
		t.Errorf("Message = %q, want the cause alone", got)
	}
}

func TestCountAndDuration(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q", n, got)
		}
	}
	for d, want := range map[time.Duration]string{50 * time.Millisecond: "50ms", 1500 * time.Millisecond: "1.5s", 90 * time.Second: "1m30s"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%s) = %q", d, got)
		}
	}
}

func TestTextRendersARun(t *testing.T) {
	var out, errb bytes.Buffer
	tx := &Text{Out: &out, Err: &errb, Stream: true}
	defer tx.Close()
	c1 := llm.ToolCall{ID: "1", Name: "read_file", Arguments: `{"path":"a.go"}`}
	c2 := llm.ToolCall{ID: "2", Name: "grep", Arguments: `{"pattern":"x"}`}
	c3 := llm.ToolCall{ID: "3", Name: "bash", Arguments: `{"command":"go test"}`}
	tx.Start("run_1", "openai:m", false)
	for _, ev := range []agent.Event{
		agent.TextDelta{Text: "Let me "}, agent.TextDelta{Text: "look."},
		agent.ToolCall{Call: c1}, agent.ToolCall{Call: c2},
		agent.ToolResult{Call: c1, Result: llm.ToolResult{Content: "1\tpackage a"}},
		agent.ToolResult{Call: c2, Result: llm.ToolResult{Content: "no matches", IsError: true}},
		agent.Retrying{Attempt: 1, Wait: 500 * time.Millisecond, Err: &model.Error{Kind: model.KindServer, Status: 503, Message: "busy"}},
		agent.ToolCall{Call: c3},
		agent.ToolResult{Call: c3, Result: llm.ToolResult{Content: "ok\n[exit code 0]"}},
		agent.TextDelta{Text: "Fixed.\n"},
		agent.Usage{Total: llm.Usage{InputTokens: 1500, OutputTokens: 20}, CostUSD: 0.01},
	} {
		tx.Event(ev)
	}
	tx.Done(agent.Result{Output: "Fixed.\n", Usage: llm.Usage{InputTokens: 1500, OutputTokens: 20}, CostUSD: 0.01, Calls: make([]run.CallRecord, 3)})
	if got := out.String(); got != "Let me look.\nFixed.\n" {
		t.Errorf("stdout = %q", got)
	}
	want := strings.Join([]string{
		"run run_1 · openai:m",
		"[read_file: a.go]",
		"[grep: x]",
		"  ✓ read_file: read 1 line",
		"  ✗ grep: no matches",
		"  ↻ 503 server: busy; retrying in 500ms (attempt 1 failed)",
		"[bash: go test]",
		"  ✓ exit 0: ok",
		"✓ done · 3 turns · 1,500 in / 20 out tokens · $0.0100",
		"",
	}, "\n")
	if got := errb.String(); got != want {
		t.Errorf("stderr =\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(out.String()+errb.String(), "\x1b") {
		t.Error("escape sequences without Color")
	}
}

func TestTextColourAndIndent(t *testing.T) {
	var out bytes.Buffer
	tx := &Text{Out: &out, Err: &out, Color: true, Indent: "   ", Stream: true}
	tx.Start("run_1", "m", false)
	tx.Event(agent.TextDelta{Text: "one\ntwo"})
	tx.Fail("run_1", &agent.RunError{RunID: "run_1", Err: context.Canceled, Snapshot: json.RawMessage(`{}`)}, true)
	tx.Close()
	got := out.String()
	if !strings.Contains(got, "   one\n   two\n") {
		t.Errorf("answer lines not indented: %q", got)
	}
	if !strings.Contains(got, "\x1b[33m") || !strings.Contains(got, "loom resume run_1") {
		t.Errorf("no colour or no resume hint: %q", got)
	}
}

func TestJSONLFail(t *testing.T) {
	var b bytes.Buffer
	j := &JSONL{W: &b}
	j.Fail("run_1", &agent.RunError{RunID: "run_1", Err: &model.Error{Kind: model.KindQuota, Message: "no credit"}}, false)
	var l map[string]any
	if err := json.Unmarshal(b.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	if l["type"] != "error" || l["kind"] != "quota_exhausted" || l["run_id"] != "run_1" || !strings.Contains(fmt.Sprint(l["message"]), "no credit") {
		t.Errorf("error line = %v", l)
	}
}

// Without Stream (Out is a pipe or a file), Out gets each run's final
// answer and nothing else: not the text of an attempt that broke off and
// was asked again, not text the model wrote beside its tool calls, not an
// answer the output schema sent back, not the partial answer of a run
// that failed. With Spinner (Err is a terminal) the text shows there as it
// arrives.
func TestTextOutHoldsTheFinalAnswerOnly(t *testing.T) {
	broke := &model.Error{Kind: model.KindTruncatedStream, Message: "cut"}
	for _, c := range []struct {
		name   string
		events []agent.Event
		res    *agent.Result // nil: the run fails
		want   string
	}{
		{"restarted", []agent.Event{
			agent.TextDelta{Turn: 1, Text: "The answer is "},
			agent.TurnRestarted{Turn: 1, Attempt: 1, Wait: time.Second, Err: broke},
			agent.TextDelta{Turn: 1, Text: "The answer is "}, agent.TextDelta{Turn: 1, Text: "forty-two."},
		}, &agent.Result{Output: "The answer is forty-two."}, "The answer is forty-two.\n"},
		{"beside tool calls", []agent.Event{
			agent.TextDelta{Turn: 1, Text: "Let me look."},
			agent.ToolCall{Turn: 1, Call: llm.ToolCall{ID: "1", Name: "read_file", Arguments: `{"path":"a"}`}},
			agent.ToolResult{Turn: 1, Call: llm.ToolCall{ID: "1", Name: "read_file"}, Result: llm.ToolResult{Content: "x"}},
			agent.TextDelta{Turn: 2, Text: "Done.\n"},
		}, &agent.Result{Output: "Done.\n"}, "Done.\n"},
		{"output schema", []agent.Event{
			agent.TextDelta{Turn: 1, Text: "not json"},
			agent.Note{Turn: 1, Reason: "output", Text: "Your answer does not match the required output schema"},
			agent.TextDelta{Turn: 2, Text: `{"a":1}`},
		}, &agent.Result{Output: `{"a":1}`}, `{"a":1}` + "\n"},
		{"control characters", nil, &agent.Result{Output: "\x1b[2Jgone"}, "?[2Jgone\n"},
		{"empty answer", []agent.Event{agent.TextDelta{Turn: 1, Text: "thinking aloud"}}, &agent.Result{}, ""},
		{"failed", []agent.Event{agent.TextDelta{Turn: 1, Text: "The answer is "}}, nil, ""},
	} {
		for _, spinner := range []bool{false, true} {
			var out, errb bytes.Buffer
			tx := &Text{Out: &out, Err: &errb, Spinner: spinner}
			tx.Start("run_1", "m", false)
			for _, ev := range c.events {
				tx.Event(ev)
			}
			if c.res != nil {
				tx.Done(*c.res)
			} else {
				tx.Fail("run_1", errors.New("boom"), false)
			}
			tx.Close()
			if got := out.String(); got != c.want {
				t.Errorf("%s (spinner %v): Out = %q, want %q", c.name, spinner, got, c.want)
			}
			shown := strings.Contains(errb.String(), "The answer is") || strings.Contains(errb.String(), "Let me look.") || strings.Contains(errb.String(), "not json") || strings.Contains(errb.String(), "thinking aloud")
			if len(c.events) > 0 && shown != spinner {
				t.Errorf("%s (spinner %v): provisional text on Err: %v\n%q", c.name, spinner, shown, errb.String())
			}
		}
	}
}

// With Stream, the answer reaches Out as it arrives, and is not written
// again at the end; a run already done, whose answer is given as one
// delta, shows it once.
func TestTextStream(t *testing.T) {
	var out, errb bytes.Buffer
	tx := &Text{Out: &out, Err: &errb, Stream: true}
	tx.Start("run_1", "m", false)
	tx.Event(agent.TextDelta{Text: "The answer "})
	if out.String() != "The answer " {
		t.Fatalf("Out = %q before the end", out.String())
	}
	tx.Event(agent.TextDelta{Text: "is 42."})
	tx.Done(agent.Result{Output: "The answer is 42."})
	tx.Close()
	if got := out.String(); got != "The answer is 42.\n" {
		t.Errorf("Out = %q", got)
	}
}
