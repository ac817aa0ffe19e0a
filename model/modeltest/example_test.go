package modeltest_test

import (
	"context"
	"fmt"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
)

func ExampleNewScript() {
	m := modeltest.NewScript(
		modeltest.ToolCalls(modeltest.Call("c1", "read_file", `{"path":"main.go"}`)),
		modeltest.Fail(model.KindOverloaded),
		modeltest.Text("main.go is a hello world."),
	)
	ctx := context.Background()
	req := llm.Request{Messages: []llm.Message{llm.UserText("What is in main.go?")}}

	resp, _ := m.Generate(ctx, req)
	fmt.Println(resp.FinishReason, resp.ToolCalls()[0].Name)
	_, err := m.Generate(ctx, req)
	fmt.Println(model.KindOf(err), model.IsRetryable(err))
	resp, _ = m.Generate(ctx, req)
	fmt.Println(resp.Text())
	fmt.Println(len(m.Requests()), m.Remaining())
	// Output:
	// tool_calls read_file
	// overloaded true
	// main.go is a hello world.
	// 3 0
}
