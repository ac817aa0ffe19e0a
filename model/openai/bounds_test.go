package openai_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/anthropic"
	"github.com/loomkit/loom/model/openai"
	"github.com/loomkit/loom/tool"
)

// An answer past the bounds fails the run with its typed error, and none
// of its calls runs: 5,000 calls (over the default 4,096), blocking and
// streamed, through either adapter, driven by the agent.
func TestAgentRunsNoCallOfARefusedAnswer(t *testing.T) {
	cs := make([]llm.ToolCall, 5000)
	for i := range cs {
		cs[i] = loomtest.Call(fmt.Sprintf("call_%d", i), "touch", `{"path":"x"}`)
	}
	turn := loomtest.ToolCalls(cs...)
	for _, format := range []string{"openai", "anthropic"} {
		for _, mode := range []string{"run", "stream"} {
			t.Run(format+"/"+mode, func(t *testing.T) {
				srv := loomtest.Start(loomtest.Config{Repeat: true, Turns: []loomtest.Turn{turn}})
				defer srv.Close()
				var m model.Model = openai.New(openai.Config{BaseURL: srv.OpenAIURL(), APIKey: "k", Model: "gpt-4o-mini"})
				if format == "anthropic" {
					m = anthropic.New(anthropic.Config{BaseURL: srv.AnthropicURL(), APIKey: "k", Model: "claude-haiku-4-5"})
				}
				var ran atomic.Int64
				touch := tool.Func("touch", "Touch a file.", func(ctx context.Context, in struct {
					Path string `json:"path"`
				}) (string, error) {
					ran.Add(1)
					return "ok", nil
				}, &tool.FuncOptions[struct {
					Path string `json:"path"`
				}]{Effect: llm.EffectIdempotent})
				set, err := tool.NewSet(touch)
				if err != nil {
					t.Fatal(err)
				}
				a := agent.New(agent.Config{Model: m, Tools: set})
				if mode == "run" {
					_, err = a.Run(context.Background(), agent.Input{Prompt: llm.UserText("touch x")})
				} else {
					for _, e := range a.Stream(context.Background(), agent.Input{Prompt: llm.UserText("touch x")}) {
						if e != nil {
							err = e
						}
					}
				}
				if model.KindOf(err) != model.KindAnswerTooLarge {
					t.Fatalf("err = %v, want %s", err, model.KindAnswerTooLarge)
				}
				if n := ran.Load(); n != 0 {
					t.Fatalf("%d calls of the refused answer ran", n)
				}
				if n := len(srv.Requests()); n != 1 {
					t.Errorf("%d requests: the refused answer was asked for again", n)
				}
			})
		}
	}
}

// Parts are counted as the accumulator makes them: reasoning and content
// that take turns make a part each, so a stream that alternates them
// cannot pile up parts under the byte bound.
func TestPartsCountedAsTheAccumulatorMakesThem(t *testing.T) {
	var chunks []string
	for i := range 10 {
		field := "reasoning_content"
		if i%2 == 1 {
			field = "content"
		}
		chunks = append(chunks, fmt.Sprintf(`{"id":"x","choices":[{"index":0,"delta":{"%s":"%d"},"finish_reason":null}]}`, field, i))
	}
	chunks = append(chunks, `{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	for _, c := range []struct {
		max int
		ok  bool
	}{{10, true}, {9, false}} {
		m, _ := start(t, openai.Config{MaxParts: c.max}, sseReply(events(chunks...)))
		r, _, err := collect(m.Stream(bg, userReq("q")))
		if c.ok {
			if err != nil || len(r.Message.Parts) != 10 {
				t.Errorf("MaxParts %d: %d parts, err %v; want 10 parts", c.max, len(r.Message.Parts), err)
			}
		} else if model.KindOf(err) != model.KindAnswerTooLarge {
			t.Errorf("MaxParts %d: err = %v, want %s", c.max, err, model.KindAnswerTooLarge)
		}
	}
}
