package modeltest_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
)

var _ model.Model = (*modeltest.Script)(nil)

func collect(t *testing.T, m model.Model, req llm.Request) (llm.Response, []llm.Event, error) {
	t.Helper()
	var acc llm.Accumulator
	var evs []llm.Event
	for e, err := range m.Stream(context.Background(), req) {
		if err != nil {
			return acc.Response(), evs, err
		}
		evs = append(evs, e)
		acc.Add(e)
	}
	return acc.Response(), evs, nil
}

func TestScriptPlaysTurnsInOrder(t *testing.T) {
	ctx := context.Background()
	s := modeltest.NewScript(
		modeltest.ToolCalls(modeltest.Call("c1", "read", `{"path":"a"}`), modeltest.Call("c2", "ls", "")),
		modeltest.Text("done").WithUsage(llm.Usage{InputTokens: 10, OutputTokens: 2}),
	)
	req1 := llm.Request{System: "sys", Messages: []llm.Message{llm.UserText("hi")}}
	r1, err := s.Generate(ctx, req1)
	if err != nil {
		t.Fatal(err)
	}
	calls := r1.ToolCalls()
	if len(calls) != 2 || calls[0].ID != "c1" || calls[1].Name != "ls" || r1.FinishReason != llm.FinishToolCalls {
		t.Fatalf("turn 1 = %+v", r1)
	}
	req2 := llm.Request{System: "sys", Messages: append(req1.Messages, r1.Message)}
	r2, err := s.Generate(ctx, req2)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Text() != "done" || r2.Usage.OutputTokens != 2 {
		t.Fatalf("turn 2 = %+v", r2)
	}
	_, err = s.Generate(ctx, req2)
	if !errors.Is(err, modeltest.ErrExhausted) || model.KindOf(err) != model.KindBadRequest {
		t.Fatalf("third call: err = %v, want ErrExhausted", err)
	}
	reqs := s.Requests()
	if len(reqs) != 3 || s.Calls() != 3 || s.Remaining() != 0 {
		t.Fatalf("recorded %d requests, calls %d, remaining %d", len(reqs), s.Calls(), s.Remaining())
	}
	if !reflect.DeepEqual(reqs[0], req1) || len(reqs[1].Messages) != 2 {
		t.Fatalf("recorded %+v", reqs)
	}
}

func TestScriptRecordsACopy(t *testing.T) {
	s := modeltest.NewScript(modeltest.Text("a"))
	msgs := []llm.Message{llm.UserText("original")}
	if _, err := s.Generate(context.Background(), llm.Request{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	msgs[0].Parts[0] = llm.Text{Text: "changed"}
	if got := s.Requests()[0].Messages[0].Text(); got != "original" {
		t.Fatalf("recorded message changed with the caller's slice: %q", got)
	}
}

func TestScriptStreamEqualsGenerate(t *testing.T) {
	turn := modeltest.Turn{Response: modeltest.Response(llm.FinishToolCalls,
		llm.Thinking{Text: "hmm", Signature: "sig"},
		llm.Text{Text: "let me look"},
		modeltest.Call("c1", "read", `{"path":"a"}`),
	)}
	turn = turn.WithUsage(llm.Usage{InputTokens: 5, OutputTokens: 7})
	blocking, err := modeltest.NewScript(turn).Generate(context.Background(), llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	streamed, _, err := collect(t, modeltest.NewScript(turn), llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(blocking, streamed) {
		t.Fatalf("stream folds to\n%+v\nblocking gives\n%+v", streamed, blocking)
	}
}

func TestScriptErrorTurn(t *testing.T) {
	s := modeltest.NewScript(modeltest.Fail(model.KindOverloaded), modeltest.Fail(model.KindAuth))
	_, err := s.Generate(context.Background(), llm.Request{})
	if model.KindOf(err) != model.KindOverloaded || !model.IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}
	_, evs, err := collect(t, s, llm.Request{})
	if model.KindOf(err) != model.KindAuth || len(evs) != 0 {
		t.Fatalf("stream: %d events, err %v", len(evs), err)
	}
}

func TestScriptCutStream(t *testing.T) {
	turn := modeltest.ToolCalls(modeltest.Call("c1", "read", `{"path":"a"}`))
	turn.CutAfter = 1 // after the ToolCallStart, before its end and the Finish
	resp, evs, err := collect(t, modeltest.NewScript(turn), llm.Request{})
	if model.KindOf(err) != model.KindTruncatedStream {
		t.Fatalf("err = %v, want truncated stream", err)
	}
	if len(evs) != 1 || !resp.Truncated || !resp.ToolCalls()[0].Incomplete {
		t.Fatalf("events %v, response %+v", evs, resp)
	}
	if _, err := modeltest.NewScript(turn).Generate(context.Background(), llm.Request{}); model.KindOf(err) != model.KindTruncatedStream {
		t.Fatalf("Generate of a cut turn: err = %v", err)
	}
}

func TestScriptEventsWithoutFinishAreTruncated(t *testing.T) {
	turn := modeltest.Turn{Events: []llm.Event{llm.TextDelta{Text: "partial"}}}
	_, evs, err := collect(t, modeltest.NewScript(turn), llm.Request{})
	if model.KindOf(err) != model.KindTruncatedStream || len(evs) != 1 {
		t.Fatalf("events %v, err %v", evs, err)
	}
	if _, err := modeltest.NewScript(turn).Generate(context.Background(), llm.Request{}); model.KindOf(err) != model.KindTruncatedStream {
		t.Fatalf("Generate: err = %v", err)
	}
	turn.Events = append(turn.Events, llm.Finish{Reason: llm.FinishStop})
	resp, err := modeltest.NewScript(turn).Generate(context.Background(), llm.Request{})
	if err != nil || resp.Text() != "partial" || resp.FinishReason != llm.FinishStop {
		t.Fatalf("Generate: %+v, %v", resp, err)
	}
}

func TestScriptStreamIsSingleUse(t *testing.T) {
	s := modeltest.NewScript(modeltest.Text("a"), modeltest.Text("b"))
	seq := s.Stream(context.Background(), llm.Request{})
	for _, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	var last error
	for e, err := range seq {
		n++
		if e != nil {
			t.Fatalf("second range yielded event %v", e)
		}
		last = err
	}
	if n != 1 || last == nil {
		t.Fatalf("second range: %d elements, err %v", n, last)
	}
	if s.Remaining() != 1 {
		t.Fatalf("second range took a turn: remaining %d", s.Remaining())
	}
}

func TestScriptStreamBreakStops(t *testing.T) {
	s := modeltest.NewScript(modeltest.Turn{Events: []llm.Event{
		llm.TextDelta{Text: "a"}, llm.TextDelta{Text: "b"}, llm.Finish{Reason: llm.FinishStop},
	}})
	var n int
	for range s.Stream(context.Background(), llm.Request{}) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("got %d elements after break", n)
	}
}

func TestScriptDelayHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := modeltest.NewScript(modeltest.Turn{Response: modeltest.Text("late").Response, Delay: time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := s.Generate(ctx, llm.Request{})
		if !errors.Is(err, context.DeadlineExceeded) || model.KindOf(err) != model.KindTimeout {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("returned after %v, want 1s", d)
		}

		s = modeltest.NewScript(modeltest.Turn{Response: modeltest.Text("on time").Response, Delay: time.Minute})
		resp, err := s.Generate(context.Background(), llm.Request{})
		if err != nil || resp.Text() != "on time" || time.Since(start) != time.Second+time.Minute {
			t.Fatalf("resp %+v err %v after %v", resp, err, time.Since(start))
		}
	})
}

func TestScriptCancelledContextTakesNoTurn(t *testing.T) {
	s := modeltest.NewScript(modeltest.Text("a"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Generate(ctx, llm.Request{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	for _, err := range s.Stream(ctx, llm.Request{}) {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stream err = %v", err)
		}
	}
	if s.Remaining() != 1 || s.Calls() != 0 {
		t.Fatalf("remaining %d calls %d", s.Remaining(), s.Calls())
	}
}

func TestScriptConcurrentUse(t *testing.T) {
	const n = 50
	turns := make([]modeltest.Turn, n)
	for i := range turns {
		turns[i] = modeltest.Text("x")
	}
	s := modeltest.NewScript(turns...)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Go(func() {
			if i%2 == 0 {
				_, err := s.Generate(context.Background(), llm.Request{})
				errs <- err
				return
			}
			for _, err := range s.Stream(context.Background(), llm.Request{}) {
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s.Calls() != n || s.Remaining() != 0 {
		t.Fatalf("calls %d remaining %d", s.Calls(), s.Remaining())
	}
}
