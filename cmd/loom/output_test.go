package main

import (
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
)

// A call of a tool that does not exist is reported in JSON Lines like any
// other: its tool_call line and a tool_result line saying the tool is
// unknown, as are the other calls of its turn (none of them runs).
func TestUnknownToolCallIsReported(t *testing.T) {
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		loomtest.ToolCalls(loomtest.Call("c1", "rm_everything", `{"path":"/"}`), loomtest.Call("c2", "read_file", `{"path":"notes.txt"}`)),
		loomtest.Text("I cannot do that."),
	}})
	h.writeFile("notes.txt", "hello\n")
	r := h.run("run", "--output", "jsonl", "clean up").want(t, 0)
	ls := lines(t, r.stdout)
	calls, results := ofType(ls, "tool_call"), ofType(ls, "tool_result")
	if len(calls) != 2 || len(results) != 2 {
		t.Fatalf("%d tool_call and %d tool_result lines, want 2 each\n%s", len(calls), len(results), r.stdout)
	}
	for i, id := range []string{"c1", "c2"} {
		if calls[i]["id"] != id || results[i]["id"] != id || results[i]["is_error"] != true {
			t.Errorf("call %d: %v / %v", i, calls[i], results[i])
		}
	}
	if calls[0]["name"] != "rm_everything" || !strings.Contains(results[0]["content"].(string), `no tool named "rm_everything"`) {
		t.Errorf("the unknown call: %v / %v", calls[0], results[0])
	}
	// tool_result comes after its tool_call, and both before done.
	order := []string{}
	for _, l := range ls {
		if typ := l["type"].(string); typ == "tool_call" || typ == "tool_result" || typ == "done" {
			order = append(order, typ)
		}
	}
	if strings.Join(order, " ") != "tool_call tool_call tool_result tool_result done" {
		t.Errorf("order: %v", order)
	}
}

// In text mode stdout holds the run's final answer and nothing else when
// it is a pipe or a file, whatever text came before: a streamed attempt
// that failed and was asked again, text the model wrote beside its tool
// calls, a run resumed after a failure.
func TestStdoutHoldsTheFinalAnswerOnly(t *testing.T) {
	restarted := func(final string) []loomtest.Turn {
		broken := loomtest.Text("The answer is ")
		broken.Chunk = 4
		return []loomtest.Turn{broken.CutAt(3, loomtest.CutAbort), loomtest.Text(final)}
	}
	narrated := loomtest.Turn{Parts: []llm.Part{
		llm.Text{Text: "Let me look at the notes first."},
		loomtest.Call("c1", "read_file", `{"path":"notes.txt"}`),
	}}
	for _, c := range []struct {
		name  string
		turns []loomtest.Turn
		args  []string
		want  string
	}{
		{"restarted stream", restarted("The answer is forty-two."), nil, "The answer is forty-two.\n"},
		{"text beside tool calls", []loomtest.Turn{narrated, loomtest.Text("The notes say hello.")}, nil, "The notes say hello.\n"},
		{"text beside tool calls, blocking", []loomtest.Turn{narrated, loomtest.Text("The notes say hello.")}, []string{"--no-stream"}, "The notes say hello.\n"},
		{"no final text", []loomtest.Turn{narrated, loomtest.Text("")}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, loomtest.Config{Turns: c.turns})
			h.writeFile("notes.txt", "hello\n")
			args := append([]string{"run"}, c.args...)
			r := h.run(append(args, "what is the answer")...).want(t, 0)
			if r.stdout != c.want {
				t.Errorf("stdout = %q, want %q\n%s", r.stdout, c.want, r)
			}
		})
	}
	t.Run("resumed", func(t *testing.T) {
		turns := append([]loomtest.Turn{narrated, loomtest.Status(401, "authentication_error", "bad key")}, restarted("Resumed: forty-two.")...)
		h := newHarness(t, loomtest.Config{Turns: turns})
		h.writeFile("notes.txt", "hello\n")
		first := h.run("run", "what is the answer").want(t, 1)
		if first.stdout != "" {
			t.Errorf("a failed run printed %q on stdout\n%s", first.stdout, first)
		}
		r := h.run("resume", runIDFrom(t, first.stderr)).want(t, 0)
		if r.stdout != "Resumed: forty-two.\n" {
			t.Errorf("stdout = %q\n%s", r.stdout, r)
		}
	})
}
