package run_test

import (
	"fmt"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
)

// The canonical driving loop, with a scripted model and one tool.
func Example() {
	r := run.New(run.Config{
		System:   "You answer with the weather.",
		Prompt:   llm.UserText("Weather in Paris?"),
		Tools:    []llm.ToolSpec{{Name: "get_weather", Effect: llm.EffectReadOnly}},
		MaxTurns: run.Turns(4),
	})
	// A scripted model: first a tool call with a misspelled name, then the answer.
	model := func(req llm.Request) llm.Response {
		if len(req.Messages) == 1 {
			return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
				llm.ToolCall{ID: "c1", Name: "get-weather", Arguments: `{"city":"Paris"}`},
			}}, Usage: llm.Usage{InputTokens: 50, OutputTokens: 10}}
		}
		return llm.Response{Message: llm.AssistantText("Sunny, 25°C."), Usage: llm.Usage{InputTokens: 80, OutputTokens: 6}}
	}
	for {
		step, err := r.Next()
		if err != nil {
			fmt.Println("failed:", err)
			return
		}
		switch s := step.(type) {
		case run.CallModel:
			fmt.Printf("turn %d: calling the model with %d message(s)\n", s.Turn, len(s.Request.Messages))
			if err := r.ModelResponse(model(s.Request)); err != nil {
				fmt.Println(err)
				return
			}
		case run.ResolveToolCall:
			fmt.Printf("invalid call %q, repairing to %q\n", s.Call.Name, s.Suggestion)
			if s.Suggestion == "" {
				r.Resolve(run.Fail{})
				continue
			}
			r.Resolve(run.Repair{Name: s.Suggestion})
		case run.ApproveTools:
			var ds []run.Decision
			for _, c := range s.Calls {
				ds = append(ds, run.Decision{CallID: c.Call.ID, Action: run.Approved})
			}
			r.Approve(ds)
		case run.CallTools:
			results := make([]llm.ToolResult, len(s.Calls))
			for i, c := range s.Calls {
				if c.Result != nil {
					results[i] = *c.Result // preresolved: never run it
					continue
				}
				fmt.Printf("running %s %s\n", c.Call.Name, c.Call.Arguments)
				results[i] = llm.ToolResult{CallID: c.Call.ID, Content: "sunny, 25°C"}
			}
			r.ToolResults(results)
		case run.Done:
			fmt.Printf("done: %s (%d messages, %d tokens)\n", s.Output, len(s.Messages), s.Usage.Total())
			return
		}
	}
	// Output:
	// turn 1: calling the model with 1 message(s)
	// invalid call "get-weather", repairing to "get_weather"
	// running get_weather {"city":"Paris"}
	// turn 2: calling the model with 3 message(s)
	// done: Sunny, 25°C. (4 messages, 146 tokens)
}
