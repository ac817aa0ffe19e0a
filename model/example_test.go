package model_test

import (
	"context"
	"fmt"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

func ExampleWithRetryObserver() {
	calls := 0
	flakyModel := model.Funcs{GenerateFunc: func(ctx context.Context, req llm.Request) (llm.Response, error) {
		calls++
		if calls == 1 {
			return llm.Response{}, &model.Error{Kind: model.KindRateLimited, Status: 429, RetryAfter: 1}
		}
		return llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop}, nil
	}}
	m := model.Retry(model.RetryPolicy{})(flakyModel)

	// A driver turns each retry into an event of its own run.
	ctx := model.WithRetryObserver(context.Background(), func(i model.RetryInfo) {
		fmt.Printf("retry %d after %s: %s\n", i.Attempt, i.Wait, model.KindOf(i.Err))
	})
	resp, err := m.Generate(ctx, llm.Request{Messages: []llm.Message{llm.UserText("hi")}})
	fmt.Println(resp.Text(), err)
	// Output:
	// retry 1 after 1ns: rate_limited
	// ok <nil>
}
