package loomotel_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomotel"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/tool"
)

type cityArgs struct {
	City string `json:"city"`
}

// A traced run: the agent's model and tool calls are children of the
// run's span. The spans are printed as they ended, indented under their
// parent.
func Example() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	weather := tool.Func("get_weather", "Current weather of a city.",
		func(_ context.Context, in cityArgs) (string, error) { return "sunny in " + in.City, nil },
		&tool.FuncOptions[cityArgs]{Effect: llm.EffectReadOnly})
	tools, _ := tool.NewSet(weather)
	// A scripted model stands in for a provider.
	m := modeltest.NewScript(
		modeltest.ToolCalls(modeltest.Call("c1", "get_weather", `{"city":"Paris"}`)),
		modeltest.Text("It is sunny in Paris."),
	)

	cfg := loomotel.Instrument(agent.Config{Model: m, ModelName: "gpt-4o", Tools: tools},
		loomotel.WithTracerProvider(tp), loomotel.WithProvider("openai"))
	a := agent.New(cfg)
	res, err := loomotel.Run(context.Background(), a, agent.Prompt("Weather in Paris?"),
		loomotel.WithTracerProvider(tp), loomotel.WithProvider("openai"), loomotel.WithAgentName("weather"))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(res.Output)

	spans := rec.Ended()
	root := spans[len(spans)-1]
	fmt.Println(root.Name())
	for _, s := range spans[:len(spans)-1] {
		if s.Parent().SpanID() == root.SpanContext().SpanID() {
			fmt.Println("  " + s.Name())
		}
	}
	// Output:
	// It is sunny in Paris.
	// invoke_agent weather
	//   chat gpt-4o
	//   execute_tool get_weather
	//   chat gpt-4o
}
