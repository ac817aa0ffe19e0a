package run_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
)

// BenchmarkToolLoop drives a 10-turn tool loop by hand: 9 turns of one
// tool call each, then a text answer.
func BenchmarkToolLoop(b *testing.B) {
	tools := []llm.ToolSpec{add}
	call := llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{Name: "add", Arguments: `{"a":1}`}}}, FinishReason: llm.FinishToolCalls}
	answer := llm.Response{Message: llm.AssistantText("done"), FinishReason: llm.FinishStop}
	results := make([]llm.ToolResult, 1)
	b.ReportAllocs()
	for b.Loop() {
		r := run.New(run.Config{Prompt: llm.UserText("go"), Tools: tools, MaxTurns: run.Turns(10)})
		for {
			step, err := r.Next()
			if err != nil {
				b.Fatal(err)
			}
			switch s := step.(type) {
			case run.CallModel:
				resp := call
				if s.Turn == 10 {
					resp = answer
				}
				if err := r.ModelResponse(resp); err != nil {
					b.Fatal(err)
				}
				continue
			case run.CallTools:
				results[0] = llm.ToolResult{CallID: s.Calls[0].Call.ID, Content: "2"}
				if err := r.ToolResults(results); err != nil {
					b.Fatal(err)
				}
				continue
			case run.Done:
			}
			break
		}
	}
}

// BenchmarkStep measures one tool round (Next → CallModel, ModelResponse,
// Next → CallTools, ToolResults) at 10 and 1,000 messages of history: the
// cost must not grow with history.
func BenchmarkStep(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			input := make([]llm.Message, 0, n)
			for i := range n {
				if i%2 == 0 {
					input = append(input, llm.UserText("question"))
				} else {
					input = append(input, llm.AssistantText("answer"))
				}
			}
			if n%2 == 0 {
				input = input[:n-1] // end with the user's turn
			}
			call := llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "x", Name: "add", Arguments: `{}`}}}, FinishReason: llm.FinishToolCalls}
			results := make([]llm.ToolResult, 1)
			r := run.New(run.Config{Input: input, Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(1 << 30)})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
				if err := r.ModelResponse(call); err != nil {
					b.Fatal(err)
				}
				step, err := r.Next()
				if err != nil {
					b.Fatal(err)
				}
				results[0] = llm.ToolResult{CallID: step.(run.CallTools).Calls[0].Call.ID, Content: "ok"}
				if err := r.ToolResults(results); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNext measures Next alone in PreparingRequest at 10 and 1,000
// messages: it copies no history, and allocates only the step it returns.
func BenchmarkNext(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			input := make([]llm.Message, n)
			for i := range input {
				input[i] = llm.UserText("question")
			}
			var cfg run.Config
			cfg.Input, cfg.MaxTurns = input, run.Turns(1<<30)
			answer := llm.Response{Message: llm.Message{Role: llm.RoleAssistant}}
			r := run.New(cfg)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				// Back to PreparingRequest with an empty turn and RetryTurn(""):
				// nothing is appended, so the history stays at n.
				if r.State() == run.StateAwaitingModel {
					if err := r.ModelResponse(answer); err != nil {
						b.Fatal(err)
					}
					if err := r.RetryTurn(""); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnmarshalSnapshot restores a run snapshot after a tool loop of
// 10 and 100 turns (each a call with arguments, and its result): the cost
// of reading a snapshot strictly, which grows with the history.
func BenchmarkUnmarshalSnapshot(b *testing.B) {
	for _, turns := range []int{10, 100} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			doc := loopSnapshot(b, turns)
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				var r run.Run
				if err := json.Unmarshal(doc, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// loopSnapshot returns the snapshot of a run that made turns-1 tool calls
// and waits for its last answer.
func loopSnapshot(b *testing.B, turns int) []byte {
	b.Helper()
	r := run.New(run.Config{Model: "m", System: "You are terse.", Prompt: llm.UserText("go"), Tools: []llm.ToolSpec{add}, MaxTurns: run.Turns(turns)})
	for {
		step, err := r.Next()
		if err != nil {
			b.Fatal(err)
		}
		switch s := step.(type) {
		case run.CallModel:
			if s.Turn == turns {
				doc, err := json.Marshal(r)
				if err != nil {
					b.Fatal(err)
				}
				return doc
			}
			resp := llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
				llm.Text{Text: "Adding the numbers."},
				llm.ToolCall{Name: "add", Arguments: `{"a":1,"b":2}`},
			}}, FinishReason: llm.FinishToolCalls, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}}
			if err := r.ModelResponse(resp); err != nil {
				b.Fatal(err)
			}
		case run.CallTools:
			if err := r.ToolResults([]llm.ToolResult{{CallID: s.Calls[0].Call.ID, Name: "add", Content: "3"}}); err != nil {
				b.Fatal(err)
			}
		default:
			b.Fatalf("unexpected step %T", step)
		}
	}
}
