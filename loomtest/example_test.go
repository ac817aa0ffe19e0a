package loomtest_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
)

func ExampleStart() {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{
		loomtest.Status(529, "overloaded_error", "Overloaded").WithHeader("retry-after", "1"),
		loomtest.ToolCalls(loomtest.Call("toolu_1", "read_file", `{"path":"main.go"}`)).WithUsage(llm.Usage{InputTokens: 20, OutputTokens: 8}),
	}})
	defer srv.Close()

	body := `{"model":"claude-test","max_tokens":256,"system":"Be brief.","messages":[{"role":"user","content":"Read main.go"}]}`
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.AnthropicURL()+"/v1/messages", strings.NewReader(body))
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("retry-after"), strings.Contains(string(b), `"tool_use"`))
	}
	last := srv.LastRequest()
	fmt.Println(len(srv.Requests()), last.Decoded.System, last.Decoded.Messages[0].Text())
	// Output:
	// 529 1 false
	// 200  true
	// 2 Be brief. Read main.go
}
