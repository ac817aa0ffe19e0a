package agent_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/tool"
)

type cityArgs struct {
	City string `json:"city"`
}

// An agent with one read-only tool, run to its final answer, printing
// the events a terminal would show.
func Example() {
	weather := tool.Func("get_weather", "Current weather of a city.",
		func(_ context.Context, in cityArgs) (string, error) { return "sunny, 25°C in " + in.City, nil },
		&tool.FuncOptions[cityArgs]{Effect: llm.EffectReadOnly})
	tools, _ := tool.NewSet(weather)

	// A scripted model stands in for a provider (model/openai, model/anthropic).
	m := modeltest.NewScript(
		modeltest.ToolCalls(modeltest.Call("c1", "get-weather", `{"city":"Paris"}`)), // a near miss, repaired
		modeltest.Text("It is sunny and 25°C in Paris."),
	)
	a := agent.New(agent.Config{Model: m, System: "You answer weather questions.", Tools: tools})

	for ev, err := range a.Stream(context.Background(), agent.Prompt("Weather in Paris?")) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch ev := ev.(type) {
		case agent.InvalidToolCall:
			fmt.Printf("invalid call %s, resolved: %#v\n", ev.Call.Name, ev.Resolution)
		case agent.ToolCall:
			fmt.Printf("→ %s %s\n", ev.Call.Name, ev.Call.Arguments)
		case agent.ToolResult:
			fmt.Printf("← %s\n", ev.Result.Content)
		case agent.TextDelta:
			fmt.Print(ev.Text)
		case agent.Done:
			fmt.Printf("\n(%d model calls)\n", len(ev.Result.Calls))
		}
	}
	// Output:
	// invalid call get-weather, resolved: run.Repair{Name:"get_weather"}
	// → get_weather {"city":"Paris"}
	// ← sunny, 25°C in Paris
	// It is sunny and 25°C in Paris.
	// (2 model calls)
}

// A run that waits for a person's approval is suspended, and resumed
// later, here by id from the store, with the decision.
func ExampleAgent_Resume() {
	deploy := tool.Func("deploy", "Deploys the service.",
		func(context.Context, struct{}) (string, error) { return "deployed", nil },
		&tool.FuncOptions[struct{}]{NeedsApproval: true})
	tools, _ := tool.NewSet(deploy)
	st := store.NewMemory()
	m := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("c1", "deploy", `{}`)), modeltest.Text("Deployed."))
	ask := agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) ([]run.Decision, error) {
		return nil, agent.ErrSuspend // a person will decide later
	})
	a := agent.New(agent.Config{Model: m, Tools: tools, Approver: ask, Store: st})

	_, err := a.Run(context.Background(), agent.Prompt("Ship it."))
	var susp *agent.SuspendedError
	if !errors.As(err, &susp) {
		fmt.Println("unexpected:", err)
		return
	}
	fmt.Println("waiting for:", susp.Calls[0].Call.Name)

	// Days later, maybe in another process with an agent of the same config:
	res, err := a.Resume(context.Background(), agent.Resumption{
		RunID:     susp.RunID,
		Decisions: []run.Decision{{CallID: "c1", Action: run.Approved}},
	})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(res.Output)
	// Output:
	// waiting for: deploy
	// Deployed.
}
