package run_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
)

// SEMANTICS §3: n means n model calls, literally.
func TestMaxTurnsNAllowsExactlyNCalls(t *testing.T) {
	for n := 1; n <= 5; n++ {
		calls := 0
		model := func(cm run.CallModel) (llm.Response, error) {
			calls++
			if cm.Turn != calls {
				t.Fatalf("turn %d on call %d", cm.Turn, calls)
			}
			return runtest.Answer(runtest.Call("", "add", `{}`)), nil
		}
		_, r, err := runtest.Driver{Model: checkRequests(t, model)}.Drive(run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(n)}))
		var mt *run.MaxTurnsError
		if !errors.As(err, &mt) || mt.MaxTurns != n {
			t.Fatalf("n=%d: err = %v", n, err)
		}
		if calls != n || r.Turn() != n || len(r.Calls()) != n {
			t.Fatalf("n=%d: %d calls, turn %d, %d records", n, calls, r.Turn(), len(r.Calls()))
		}
		failedWith(t, r, run.ErrMaxTurns)
	}
}

func TestMaxTurnsZeroRejectsTheFirstCall(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), MaxTurns: run.Turns(0)})
	_, err := r.Next()
	var mt *run.MaxTurnsError
	if !errors.As(err, &mt) || mt.MaxTurns != 0 {
		t.Fatalf("err = %v", err)
	}
	if r.Turn() != 0 {
		t.Fatalf("turn = %d", r.Turn())
	}
	failedWith(t, r, run.ErrMaxTurns)
}

func TestMaxTurnsErrorSaysWhatToDo(t *testing.T) {
	err := (&run.MaxTurnsError{MaxTurns: 3}).Error()
	for _, want := range []string{"3", "MaxTurns", "GracefulLastTurn"} {
		if !strings.Contains(err, want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

// SEMANTICS §3: with GracefulLastTurn the last allowed call is tool-free
// and its text ends the run.
func TestGracefulLastTurnEndsWithText(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(3), GracefulLastTurn: true})
	s := runtest.New(t, r)
	for turn := 1; turn <= 2; turn++ {
		cm := s.CallModel()
		if cm.Final || len(cm.Request.Tools) != 1 {
			t.Fatalf("turn %d: %s", turn, runtest.Describe(cm))
		}
		s.ReplyCalls(runtest.Call("", "add", `{}`))
		ct := s.CallTools()
		s.Results(runtest.Result(ct.Calls[0].Call.ID, "1"))
	}
	cm := s.Expect("CallModel turn=3 messages=6 tools=[add] choice=none final").(run.CallModel)
	if last := cm.Request.Messages[len(cm.Request.Messages)-1]; last.Text() != run.LastTurnNote {
		t.Fatalf("last message = %+v, want the last-turn note", last)
	}
	// A model that calls a tool anyway: the call is dropped, the text ends the run.
	s.Reply(runtest.Answer(llm.Text{Text: "final answer"}, runtest.Call("z", "add", `{}`)))
	done := s.Done()
	if done.Output != "final answer" || len(done.Message.ToolCalls()) != 0 {
		t.Fatalf("done = %+v", done)
	}
	if err := llm.CheckHistory(done.Messages); err != nil {
		t.Fatal(err)
	}
}

func TestGracefulLastTurnWithOneTurnSendsNoNote(t *testing.T) {
	s := runtest.New(t, run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, GracefulLastTurn: true}))
	s.Expect("CallModel turn=1 messages=1 tools=[add] choice=none final")
	s.ReplyText("hi")
	s.Expect(`Done "hi"`)
}

func TestGracefulLastTurnAtZeroStillFails(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), MaxTurns: run.Turns(0), GracefulLastTurn: true})
	if _, err := r.Next(); !errors.Is(err, run.ErrMaxTurns) {
		t.Fatalf("err = %v", err)
	}
}

// SEMANTICS §4: a retry accepted at an exhausted budget ends in
// *MaxTurnsError at the next Next.
func TestInvalidCallRetryCannotEmitPastTheBudget(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(1), MaxInvalidRetries: 5})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "nope", `{}`))
	s.ResolveToolCall()
	s.Resolve(run.Retry{Feedback: "use add"})
	if r.State() != run.StatePreparingRequest {
		t.Fatalf("state = %s", r.State())
	}
	if err := s.Err(); !errors.Is(err, run.ErrMaxTurns) {
		t.Fatalf("err = %v", err)
	}
}

func TestRetryTurnSpendsTheBudget(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x")})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyText("not json")
	if err := r.RetryTurn("answer in JSON"); err != nil {
		t.Fatal(err)
	}
	if err := s.Err(); !errors.Is(err, run.ErrMaxTurns) {
		t.Fatalf("err = %v", err)
	}
	if r.Usage() != (llm.Usage{}) || len(r.Calls()) != 1 {
		t.Fatalf("calls = %+v", r.Calls())
	}
}

// WrapUp makes the next call tool-free with the reason as a note.
func TestWrapUpSendsAToolFreeFinalCall(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(10)})
	s := runtest.New(t, r)
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "add", `{}`))
	s.CallTools()
	s.Results(runtest.Result("c1", "1"))
	if err := r.WrapUp("first"); err != nil {
		t.Fatal(err)
	}
	if err := r.WrapUp("Budget spent: answer now."); err != nil { // setting twice replaces
		t.Fatal(err)
	}
	cm := s.Expect("CallModel turn=2 messages=4 tools=[add] choice=none final").(run.CallModel)
	if got := cm.Request.Messages[3].Text(); got != "Budget spent: answer now." || cm.Request.Messages[3].Role != llm.RoleUser {
		t.Fatalf("note = %q", got)
	}
	s.ReplyText("summary")
	if done := s.Done(); done.Output != "summary" || len(done.Messages) != 5 {
		t.Fatalf("done = %+v", done)
	}
}

func TestWrapUpWithoutReasonAddsNoMessage(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(2)})
	if err := r.WrapUp(""); err != nil {
		t.Fatal(err)
	}
	s := runtest.New(t, r)
	s.Expect("CallModel turn=1 messages=1 tools=[add] choice=none final")
}

func TestWrapUpOutsidePreparingIsAProtocolError(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.CallModel()
	refused(t, r, "WrapUp while awaiting the model", func() error { return r.WrapUp("x") })
	s.ReplyCalls(runtest.Call("c1", "add", `{}`))
	refused(t, r, "WrapUp in AwaitingAdvance", func() error { return r.WrapUp("x") })
	s.CallTools()
	refused(t, r, "WrapUp while executing tools", func() error { return r.WrapUp("x") })
}
