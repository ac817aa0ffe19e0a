package runtest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
)

func TestDescribe(t *testing.T) {
	pre := &llm.ToolResult{CallID: "c2", Content: "no"}
	cases := map[string]run.Step{
		`CallModel turn=2 messages=3 tools=[a,b] choice=auto`:                    run.CallModel{Turn: 2, Request: llm.Request{Messages: make([]llm.Message, 3), Tools: []llm.ToolSpec{{Name: "a"}, {Name: "b"}}}},
		`CallModel turn=1 messages=0 tools=[] choice=none final`:                 run.CallModel{Turn: 1, Final: true, Request: llm.Request{ToolChoice: llm.ToolChoice{Mode: llm.ToolNone}}},
		`CallModel turn=1 messages=0 tools=[] choice=specific(a)`:                run.CallModel{Turn: 1, Request: llm.Request{ToolChoice: llm.ChooseTools("a")}},
		`ResolveToolCall turn=1 c1 "serch" allowed=[search] suggestion="search"`: run.ResolveToolCall{Turn: 1, Call: runtest.Call("c1", "serch", ""), Allowed: []string{"search"}, Suggestion: "search"},
		`ApproveTools turn=3 [c1 rm {"p":1}]`:                                    run.ApproveTools{Turn: 3, Calls: []run.PendingCall{{Call: runtest.Call("c1", "rm", `{"p":1}`)}}},
		`CallTools turn=1 [c1 a] [c2 b (preresolved)]`:                           run.CallTools{Turn: 1, Calls: []run.PendingCall{{Call: runtest.Call("c1", "a", "")}, {Call: runtest.Call("c2", "b", "{}"), Result: pre}}},
		`Done "hi"`: run.Done{Response: run.Response{Output: "hi"}},
		`no step`:   nil,
	}
	for want, step := range cases {
		if got := runtest.Describe(step); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

// fakeTB records a failure instead of stopping the test, so that the
// Script's own failures can be checked.
type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
}

func failureOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			fb, ok := r.(*fakeTB)
			if !ok {
				panic(r)
			}
			msg = fb.msg
		}
	}()
	f()
	return ""
}

func TestScriptFailsOnTheWrongStep(t *testing.T) {
	tb := &fakeTB{TB: t}
	s := runtest.New(tb, run.New(run.Config{Prompt: llm.UserText("x")}))
	if msg := failureOf(func() { s.CallTools() }); !strings.Contains(msg, "want %s, got %s") {
		t.Fatalf("wrong step not reported: %q", msg)
	}
	if msg := failureOf(func() { s.Expect("CallModel turn=1") }); msg == "" {
		t.Fatal("Next in AwaitingModel not reported")
	}
	if msg := failureOf(func() { s.ReplyText("hi") }); msg != "" {
		t.Fatalf("reply failed: %s", msg)
	}
	if msg := failureOf(func() { s.Expect(`Done "bye"`) }); !strings.Contains(msg, "got") {
		t.Fatalf("mismatch not reported: %q", msg)
	}
}

func TestDriverPlaysARunToTheEnd(t *testing.T) {
	var ran []string
	d := runtest.Driver{
		Model: func(cm run.CallModel) (llm.Response, error) {
			if cm.Turn == 1 {
				return runtest.Answer(runtest.Call("", "ad", `{}`), runtest.Call("", "rm", `{}`)), nil
			}
			return runtest.Answer(llm.Text{Text: "ok"}), nil
		},
		Tool: func(c run.PendingCall) llm.ToolResult {
			ran = append(ran, c.Call.Name)
			return llm.ToolResult{Content: "1"}
		},
		Resolve: func(rc run.ResolveToolCall) run.Resolution { return run.Repair{Name: rc.Suggestion} },
		Save:    runtest.RoundTrip,
	}
	r := run.New(run.Config{Prompt: llm.UserText("x"), Tools: []llm.ToolSpec{{Name: "add"}, {Name: "rm", NeedsApproval: true}}, MaxTurns: run.Turns(2)})
	resp, last, err := d.Drive(r)
	if err != nil || resp.Output != "ok" || strings.Join(ran, ",") != "add,rm" || last.State() != run.StateDone {
		t.Fatalf("resp %+v ran %v err %v", resp, ran, err)
	}
	// Errors come back as they are.
	_, _, err = runtest.Driver{Model: func(run.CallModel) (llm.Response, error) { return llm.Response{}, errors.New("boom") }}.Drive(run.New(run.Config{Prompt: llm.UserText("x")}))
	if err == nil || err.Error() != "boom" {
		t.Fatalf("err = %v", err)
	}
	// A script that never ends is cut off.
	_, _, err = runtest.Driver{Model: func(run.CallModel) (llm.Response, error) { return runtest.Answer(), nil }, MaxSteps: 1}.Drive(run.New(run.Config{Prompt: llm.UserText("x")}))
	if err == nil || !strings.Contains(err.Error(), "did not end") {
		t.Fatalf("err = %v", err)
	}
}
