package temporal_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/temporal"
	"github.com/loomkit/loom/tool"
)

// A worker process (loom worker --temporal HOST:PORT) and a client (loom
// run --temporal HOST:PORT) that starts a run, streams its progress,
// approves what needs approval and prints the answer.
func Example() {
	ctx := context.Background()
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:7233"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// The worker: models and tools by name, and the blob store the
	// workers of this machine share.
	var m model.Model // an adapter, e.g. from model/anthropic; not wrapped in model.Retry
	tools, err := tool.NewSet(tool.Func("add", "Adds two numbers.", func(_ context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return in.A + in.B, nil
	}, nil))
	if err != nil {
		log.Fatal(err)
	}
	blobs, err := temporal.NewDirBlobs(os.ExpandEnv("$HOME/.cache/loom/blobs"))
	if err != nil {
		log.Fatal(err)
	}
	w, err := temporal.NewWorker(c, temporal.Registry{Models: map[string]model.Model{"claude": m}, Tools: tools, Blobs: blobs}, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(); err != nil {
		log.Fatal(err)
	}
	defer w.Stop()

	// The client.
	h, err := temporal.Start(ctx, c, temporal.Input{
		Model: "claude",
		Tools: []string{"add"},
		Run:   run.Config{Prompt: llm.UserText("What is 2+3?"), MaxTurns: run.Turns(10)},
	}, client.StartWorkflowOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("run", h.WorkflowID)
	for e, err := range h.Progress(ctx, nil) {
		if err != nil {
			log.Fatal(err)
		}
		switch e.Kind {
		case temporal.EventModelAnswer:
			fmt.Println("model:", e.Text)
		case temporal.EventApproval:
			// loom approve RUN_ID ... does the same from another process.
			var ds []run.Decision
			for _, p := range e.Pending {
				ds = append(ds, run.Decision{CallID: p.Call.ID, Action: run.Approved})
			}
			if _, err := temporal.Approve(ctx, c, h.WorkflowID, ds); err != nil {
				log.Fatal(err)
			}
		}
	}
	resp, err := h.Result(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Output)
}

// The workflow runs in the SDK's test environment with a scripted model:
// the way to test code built on this package without a server.
func ExampleRegister() {
	script := modeltest.NewScript(
		modeltest.ToolCalls(modeltest.Call("c1", "shout", `{"text":"hello"}`)),
		modeltest.Text("done: HELLO"),
	)
	tools, _ := tool.NewSet(tool.Func("shout", "Upper-cases text.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return fmt.Sprintf("%s!", in.Text), nil
	}, &tool.FuncOptions[struct {
		Text string `json:"text"`
	}]{Effect: llm.EffectReadOnly}))

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	if err := temporal.Register(env, temporal.Registry{Models: map[string]model.Model{"m": script}, Tools: tools}); err != nil {
		log.Fatal(err)
	}
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.Input{
		Model: "m",
		Tools: []string{"shout"},
		Run:   run.Config{Prompt: llm.UserText("shout hello"), MaxTurns: run.Turns(3)},
	})
	var res temporal.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		log.Fatal(err)
	}
	for _, m := range res.Response.Messages {
		for _, r := range m.ToolResults() {
			fmt.Println("tool:", r.Content)
		}
	}
	fmt.Println(res.Response.Output)
	// Output:
	// tool: hello!
	// done: HELLO
}
