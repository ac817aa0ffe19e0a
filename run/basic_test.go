package run_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
)

var (
	weather = llm.ToolSpec{Name: "get_weather", Effect: llm.EffectReadOnly}
	add     = llm.ToolSpec{Name: "add", Effect: llm.EffectIdempotent}
	remove  = llm.ToolSpec{Name: "delete_file", NeedsApproval: true}
)

func TestTextOnlyRunCompletesInOneTurn(t *testing.T) {
	s := runtest.New(t, run.New(run.Config{Prompt: llm.UserText("What is 2+2?")}))
	cm := s.CallModel()
	if cm.Turn != 1 || len(cm.Request.Messages) != 1 || cm.Request.Messages[0].Text() != "What is 2+2?" {
		t.Fatalf("CallModel = %+v", cm)
	}
	resp := runtest.Answer(llm.Text{Text: "4"})
	resp.Usage = llm.Usage{InputTokens: 10, OutputTokens: 2}
	s.Reply(resp)
	done := s.Done()
	if done.Output != "4" || len(done.Messages) != 2 || done.Usage.Total() != 12 || len(done.Calls) != 1 {
		t.Fatalf("Done = %+v", done)
	}
	if again := s.Done(); !reflect.DeepEqual(again, done) {
		t.Fatalf("second Done differs: %+v", again)
	}
}

func TestToolRoundTripThreadsHistoryAndUsage(t *testing.T) {
	r := run.New(run.Config{Prompt: llm.UserText("weather in Paris, then summarize"), Tools: []llm.ToolSpec{weather}, MaxTurns: run.Turns(2)})
	s := runtest.New(t, r)
	s.Expect("CallModel turn=1 messages=1 tools=[get_weather] choice=auto")
	a := runtest.Answer(runtest.Call("c1", "get_weather", `{"city":"Paris"}`))
	a.Usage = llm.Usage{InputTokens: 20, OutputTokens: 5}
	s.Reply(a)
	ct := s.Expect(`CallTools turn=1 [c1 get_weather {"city":"Paris"}]`).(run.CallTools)
	if ct.Calls[0].Spec.Effect != llm.EffectReadOnly {
		t.Fatalf("spec not carried: %+v", ct.Calls[0].Spec)
	}
	s.Results(runtest.Result("c1", "sunny"))
	cm := s.Expect("CallModel turn=2 messages=3 tools=[get_weather] choice=auto")
	if err := llm.CheckHistory(cm.(run.CallModel).Request.Messages); err != nil {
		t.Fatal(err)
	}
	b := runtest.Answer(llm.Text{Text: "Sunny in Paris."})
	b.Usage = llm.Usage{InputTokens: 10, OutputTokens: 7}
	s.Reply(b)
	done := s.Done()
	if done.Output != "Sunny in Paris." || len(done.Messages) != 4 {
		t.Fatalf("Done = %+v", done)
	}
	if done.Usage != (llm.Usage{InputTokens: 30, OutputTokens: 12}) {
		t.Fatalf("usage = %+v", done.Usage)
	}
	if done.Calls[0].Index != 0 || done.Calls[1].Index != 1 {
		t.Fatalf("calls = %+v", done.Calls)
	}
}

func TestRoundTripAtEveryStepGivesTheSameDone(t *testing.T) {
	cfg := run.Config{Prompt: llm.UserText("go"), Tools: []llm.ToolSpec{weather, add}, MaxTurns: run.Turns(5)}
	model := func(cm run.CallModel) (llm.Response, error) {
		switch cm.Turn {
		case 1:
			return runtest.Answer(runtest.Call("a", "get_weather", `{}`), runtest.Call("", "add", `{"x":1}`)), nil
		case 2:
			return runtest.Answer(llm.Text{Text: "thinking"}, runtest.Call("a", "add", `{"x":2}`)), nil
		}
		return runtest.Answer(llm.Text{Text: "done"}), nil
	}
	straight, _, err := runtest.Driver{Model: model}.Drive(run.New(cfg))
	if err != nil {
		t.Fatal(err)
	}
	restored, _, err := runtest.Driver{Model: model, Save: runtest.RoundTrip}.Drive(run.New(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(straight, restored) {
		a, _ := json.Marshal(straight)
		b, _ := json.Marshal(restored)
		t.Fatalf("restored run differs:\n%s\n%s", a, b)
	}
	if straight.Output != "done" || len(straight.Calls) != 3 {
		t.Fatalf("response = %+v", straight)
	}
}

func TestMaxTurnsDefaultIsOne(t *testing.T) {
	s := runtest.New(t, run.New(run.Config{Prompt: llm.UserText("x"), Tools: []llm.ToolSpec{add}}))
	s.CallModel()
	s.ReplyCalls(runtest.Call("c1", "add", `{}`))
	s.CallTools()
	s.Results(runtest.Result("c1", "1"))
	err := s.Err()
	var mt *run.MaxTurnsError
	if !errors.As(err, &mt) || mt.MaxTurns != 1 || !errors.Is(err, run.ErrMaxTurns) {
		t.Fatalf("err = %v", err)
	}
	err = s.Err()
	if !errors.Is(err, run.ErrFailed) || !errors.Is(err, run.ErrMaxTurns) {
		t.Fatalf("later err = %v", err)
	}
}
