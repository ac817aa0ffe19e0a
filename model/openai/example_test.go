package openai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/openai"
)

func Example() {
	// A stand-in for https://api.openai.com/v1 or any compatible server.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n"+
			"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"+
			"data: [DONE]\n\n")
	}))
	defer srv.Close()

	m := model.Chain(
		openai.New(openai.Config{BaseURL: srv.URL, APIKey: "sk-...", Model: "gpt-4o"}),
		model.Retry(model.RetryPolicy{}), // the zero policy: 3 retries, 0.5 s to 8 s backoff
	)
	var acc llm.Accumulator
	for ev, err := range m.Stream(context.Background(), llm.Request{
		System:   "Be brief.",
		Messages: []llm.Message{llm.UserText("Say hello.")},
	}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		acc.Add(ev)
	}
	resp := acc.Response()
	fmt.Println(resp.Text(), resp.FinishReason)
	// Output: Hello stop
}
