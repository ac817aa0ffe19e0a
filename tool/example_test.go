package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

func ExampleFunc() {
	greet := tool.Func("greet", "Greets someone.", func(ctx context.Context, in greetArgs) (string, error) {
		return "Hello, " + in.Name + "!", nil
	}, &tool.FuncOptions[greetArgs]{Effect: llm.EffectReadOnly})

	fmt.Println(string(greet.Spec().Schema))

	res, _ := greet.Call(context.Background(), json.RawMessage(`{"name":"Ada"}`))
	fmt.Println(res.Content)

	res, _ = greet.Call(context.Background(), json.RawMessage(`{"nome":"Ada"}`))
	fmt.Println(res.IsError, strings.SplitN(res.Content, ". ", 2)[0])
	// Output:
	// {"type":"object","properties":{"name":{"type":"string","description":"who to greet"}},"required":["name"],"additionalProperties":false}
	// Hello, Ada!
	// true Invalid arguments for greet: unknown field "nome" (the fields are: name); missing required field "name"
}

func ExampleSet_Call() {
	greet := tool.Func("greet", "Greets someone.", func(ctx context.Context, in greetArgs) (string, error) {
		return "Hello, " + in.Name + "!", nil
	}, nil)
	set, err := tool.NewSet(greet)
	if err != nil {
		panic(err)
	}
	res, _ := set.Call(context.Background(), llm.ToolCall{ID: "c1", Name: "greet", Arguments: `{"name":"Bob"}`})
	fmt.Println(res.CallID, res.Content)
	res, _ = set.Call(context.Background(), llm.ToolCall{ID: "c2", Name: "rm_everything"})
	fmt.Println(res.IsError, res.Content)
	// Output:
	// c1 Hello, Bob!
	// true There is no tool named "rm_everything". The tools are: greet.
}

func ExampleTruncate() {
	fmt.Println(tool.Truncate("abcdefghijklmnopqrstuvwxyz", 10))
	// Output:
	// abcde
	//
	// [... 16 bytes cut; 10 of 26 shown. Ask for less, e.g. a narrower range or pattern ...]
	//
	// vwxyz
}
