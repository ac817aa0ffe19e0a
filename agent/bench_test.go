package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/openai"
	"github.com/loomkit/loom/tool"
)

// The end-to-end benchmarks: a 10-turn tool loop (9 tool rounds and a
// final answer) against loomtest over loopback HTTP, through agent.Run,
// agent.Stream and minimal hand-written net/http loops that make the same
// requests (the baselines): "baseline" makes blocking calls like Run,
// "baseline-stream" makes streaming calls like Stream and reads the event
// stream with bufio. The ratios of interest are run/baseline and
// stream/baseline-stream for ns/op (sequential), cpu-ns/op (50 runs in
// flight) and ns/op with 200 prior messages of about 1 KB. Every benchmark
// also reports the CPU time of the whole process (client and server) per
// run, which a busy machine disturbs less than the wall time.
//
//	go test -run '^$' -bench 'ToolLoop' -benchmem -benchtime 200x ./agent/
//
// BenchmarkToolLoopRatio reports the sequential ratios themselves, from
// interleaved runs.

const loopTurns = 10

// loopServer answers tool calls until the request holds loopTurns-1 tool
// results, then a final text: every run, however many run at once, makes
// the same requests.
func loopServer() *loomtest.Server {
	call := loomtest.ToolCalls(loomtest.Call("", "add", `{"a":2,"b":3}`))
	call.Usage = llm.Usage{InputTokens: 100, OutputTokens: 10}
	final := loomtest.Text("The sum is 5.")
	final.Usage = llm.Usage{InputTokens: 200, OutputTokens: 5}
	return loomtest.Start(loomtest.Config{
		NoRecord: true,
		Lenient:  true,
		Func: func(r *loomtest.Request) loomtest.Turn {
			n := 0
			for _, m := range r.Decoded.Messages {
				n += len(m.ToolResults())
			}
			if n < loopTurns-1 {
				return call
			}
			return final
		},
	})
}

func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}}
}

// rawAdd is the add tool written by hand, decoding its arguments with
// json.Unmarshal like the baseline does, so that the comparison measures
// the driver (tool.Func also validates the arguments against their JSON
// Schema, which costs more than the rest of a tool call).
type rawAdd struct{}

func (rawAdd) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "add", Description: "Adds a and b.", Effect: llm.EffectReadOnly,
		Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`)}
}

func (rawAdd) Call(_ context.Context, args json.RawMessage) (llm.ToolResult, error) {
	var in addArgs
	if err := json.Unmarshal(args, &in); err != nil {
		return tool.ErrorResult(err.Error()), nil
	}
	return llm.ToolResult{Content: strconv.Itoa(in.A + in.B)}, nil
}

func benchTools(tb testing.TB) *tool.Set {
	return set(tb, rawAdd{})
}

// history returns n prior messages of about 1 KB, alternating user and
// assistant.
func history(n int) []llm.Message {
	msgs := make([]llm.Message, n)
	line := strings.Repeat("lorem ipsum dolor sit amet ", 38) // ~1 KB
	for i := range msgs {
		if i%2 == 0 {
			msgs[i] = llm.UserText(fmt.Sprintf("%d: %s", i, line))
		} else {
			msgs[i] = llm.AssistantText(fmt.Sprintf("%d: %s", i, line))
		}
	}
	msgs = append(msgs, llm.UserText("and now?"))
	return msgs
}

// ---- the baseline: a minimal hand-written Chat Completions tool loop ----

type bMsg struct {
	Role       string      `json:"role"`
	Content    *string     `json:"content,omitempty"`
	ToolCalls  []bToolCall `json:"tool_calls,omitempty"`
	ToolCallID string      `json:"tool_call_id,omitempty"`
}

type bToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type bRequest struct {
	Model         string          `json:"model"`
	Messages      []bMsg          `json:"messages"`
	Tools         json.RawMessage `json:"tools"`
	Stream        bool            `json:"stream,omitempty"`
	StreamOptions *bStreamOptions `json:"stream_options,omitempty"`
}

type bStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// bChunk is a chat.completion.chunk, as little of it as the loop needs.
type bChunk struct {
	Choices []struct {
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

type bResponse struct {
	Choices []struct {
		Message      bMsg   `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

var bTools = json.RawMessage(`[{"type":"function","function":{"name":"add","description":"Adds a and b.","parameters":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}}}]`)

// baselineLoop is the blocking loop; with stream set it asks for event
// streams (with usage, as the adapter does) and reads them line by line.
func baselineLoop(ctx context.Context, client *http.Client, url string, prior []llm.Message, stream bool) (string, error) {
	msgs := []bMsg{{Role: "system", Content: ptr("You add numbers.")}}
	for _, m := range prior {
		t := m.Text()
		msgs = append(msgs, bMsg{Role: string(m.Role), Content: &t})
	}
	if len(prior) == 0 {
		msgs = append(msgs, bMsg{Role: "user", Content: ptr("add 2 and 3")})
	}
	var buf bytes.Buffer
	var br *bufio.Reader
	for turn := 0; turn < loopTurns+1; turn++ {
		buf.Reset()
		body := bRequest{Model: "gpt-4o-mini", Messages: msgs, Tools: bTools}
		if stream {
			body.Stream, body.StreamOptions = true, &bStreamOptions{IncludeUsage: true}
		}
		if err := json.NewEncoder(&buf).Encode(body); err != nil {
			return "", err
		}
		req, err := http.NewRequestWithContext(ctx, "POST", url+"/chat/completions", bytes.NewReader(buf.Bytes()))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer k")
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		var msg bMsg
		if stream {
			if br == nil {
				br = bufio.NewReader(resp.Body)
			} else {
				br.Reset(resp.Body)
			}
			msg, err = readStream(br)
		} else {
			var out bResponse
			err = json.NewDecoder(resp.Body).Decode(&out)
			if err == nil && len(out.Choices) == 0 {
				err = fmt.Errorf("no choices")
			}
			if err == nil {
				msg = out.Choices[0].Message
			}
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return "", err
		}
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("status %d", resp.StatusCode)
		}
		if len(msg.ToolCalls) == 0 {
			return *msg.Content, nil
		}
		msgs = append(msgs, msg)
		for _, c := range msg.ToolCalls {
			var in addArgs
			if err := json.Unmarshal([]byte(c.Function.Arguments), &in); err != nil {
				return "", err
			}
			res := strconv.Itoa(in.A + in.B)
			msgs = append(msgs, bMsg{Role: "tool", Content: &res, ToolCallID: c.ID})
		}
	}
	return "", fmt.Errorf("no final answer")
}

// readStream reads one Chat Completions event stream into the assistant
// message it carries.
func readStream(br *bufio.Reader) (bMsg, error) {
	msg := bMsg{Role: "assistant"}
	var text strings.Builder
	hasText := false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return msg, fmt.Errorf("stream ended early: %w", err)
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			break
		}
		var c bChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return msg, err
		}
		for _, ch := range c.Choices {
			if d := ch.Delta.Content; d != nil {
				text.WriteString(*d)
				hasText = hasText || *d != ""
			}
			for _, tc := range ch.Delta.ToolCalls {
				for len(msg.ToolCalls) <= tc.Index {
					msg.ToolCalls = append(msg.ToolCalls, bToolCall{Type: "function"})
				}
				call := &msg.ToolCalls[tc.Index]
				if tc.ID != "" {
					call.ID = tc.ID
				}
				call.Function.Name += tc.Function.Name
				call.Function.Arguments += tc.Function.Arguments
			}
		}
	}
	if hasText || len(msg.ToolCalls) == 0 {
		msg.Content = ptr(text.String())
	}
	return msg, nil
}

func ptr(s string) *string { return &s }

// ---- the benchmarks ----

type loopFunc func(ctx context.Context) error

func loops(tb testing.TB, srv *loomtest.Server, client *http.Client, prior []llm.Message) map[string]loopFunc {
	m := openai.New(openai.Config{BaseURL: srv.OpenAIURL(), APIKey: "k", Model: "gpt-4o-mini", HTTPClient: client})
	a := agent.New(agent.Config{Model: m, System: "You add numbers.", Tools: benchTools(tb), LoopGuard: agent.LoopGuard{Repeats: -1}})
	in := agent.Prompt("add 2 and 3")
	if prior != nil {
		in = agent.Input{History: prior}
	}
	check := func(out string) error {
		if out != "The sum is 5." {
			return fmt.Errorf("output %q", out)
		}
		return nil
	}
	return map[string]loopFunc{
		"baseline": func(ctx context.Context) error {
			out, err := baselineLoop(ctx, client, srv.OpenAIURL(), prior, false)
			if err != nil {
				return err
			}
			return check(out)
		},
		"baseline-stream": func(ctx context.Context) error {
			out, err := baselineLoop(ctx, client, srv.OpenAIURL(), prior, true)
			if err != nil {
				return err
			}
			return check(out)
		},
		"run": func(ctx context.Context) error {
			res, err := a.Run(ctx, in)
			if err != nil {
				return err
			}
			return check(res.Output)
		},
		"stream": func(ctx context.Context) error {
			for ev, err := range a.Stream(ctx, in) {
				if err != nil {
					return err
				}
				if d, ok := ev.(agent.Done); ok {
					return check(d.Result.Output)
				}
			}
			return fmt.Errorf("no done event")
		},
	}
}

var loopOrder = []string{"baseline", "run", "baseline-stream", "stream"}

func BenchmarkToolLoop(b *testing.B) {
	srv := loopServer()
	defer srv.Close()
	fns := loops(b, srv, benchClient(), nil)
	for _, name := range loopOrder {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			if err := fns[name](ctx); err != nil { // warm the connections
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if err := fns[name](ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkToolLoopParallel keeps 50 runs in flight and reports the CPU
// time of the whole process (client and server) per run.
func BenchmarkToolLoopParallel(b *testing.B) {
	srv := loopServer()
	defer srv.Close()
	fns := loops(b, srv, benchClient(), nil)
	for _, name := range loopOrder {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			if err := fns[name](ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetParallelism(max(1, 50/max(1, runtimeProcs())))
			cpu0 := cpuTime()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := fns[name](ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func BenchmarkToolLoopLongHistory(b *testing.B) {
	srv := loopServer()
	defer srv.Close()
	fns := loops(b, srv, benchClient(), history(200))
	for _, name := range loopOrder {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			if err := fns[name](ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if err := fns[name](ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkToolLoopRatio measures the ratios directly: each iteration
// runs the loop through the agent and through its hand-written baseline,
// one right after the other (alternating which goes first), and the
// benchmark reports agent time / baseline time over all iterations as
// "ratio", and the same for the CPU time of the process as "cpu-ratio".
// A busy machine slows both sides of every pair alike, so the ratios are
// much steadier than ones computed from separate benchmarks.
func BenchmarkToolLoopRatio(b *testing.B) {
	srv := loopServer()
	defer srv.Close()
	client := benchClient()
	for _, prior := range []int{0, 200} {
		var fns map[string]loopFunc
		if prior == 0 {
			fns = loops(b, srv, client, nil)
		} else {
			fns = loops(b, srv, client, history(prior))
		}
		for _, pair := range [][2]string{{"run", "baseline"}, {"stream", "baseline-stream"}} {
			name := pair[0]
			if prior > 0 {
				name += "-history" + strconv.Itoa(prior)
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				agentLoop, baseLoop := fns[pair[0]], fns[pair[1]]
				for _, f := range []loopFunc{agentLoop, baseLoop} {
					if err := f(ctx); err != nil {
						b.Fatal(err)
					}
				}
				var agentTime, baseTime, agentCPU, baseCPU time.Duration
				i := 0
				for b.Loop() {
					first, second := agentLoop, baseLoop
					if i%2 == 1 {
						first, second = baseLoop, agentLoop
					}
					c0, t0 := cpuTime(), time.Now()
					if err := first(ctx); err != nil {
						b.Fatal(err)
					}
					c1, t1 := cpuTime(), time.Now()
					if err := second(ctx); err != nil {
						b.Fatal(err)
					}
					c2, t2 := cpuTime(), time.Now()
					if i%2 == 0 {
						agentTime, baseTime = agentTime+t1.Sub(t0), baseTime+t2.Sub(t1)
						agentCPU, baseCPU = agentCPU+c1-c0, baseCPU+c2-c1
					} else {
						baseTime, agentTime = baseTime+t1.Sub(t0), agentTime+t2.Sub(t1)
						baseCPU, agentCPU = baseCPU+c1-c0, agentCPU+c2-c1
					}
					i++
				}
				b.ReportMetric(float64(agentTime)/float64(baseTime), "ratio")
				b.ReportMetric(float64(agentCPU)/float64(baseCPU), "cpu-ratio")
			})
		}
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// BenchmarkDriverOnly is the 10-turn loop against an in-memory model that
// answers instantly: what the driver itself costs, without HTTP, wire
// encoding or a server.
func BenchmarkDriverOnly(b *testing.B) {
	call := modeltestResponse(llm.FinishToolCalls, llm.ToolCall{ID: "c", Name: "add", Arguments: `{"a":2,"b":3}`})
	final := modeltestResponse(llm.FinishStop, llm.Text{Text: "The sum is 5."})
	m := model.Funcs{GenerateFunc: func(_ context.Context, req llm.Request) (llm.Response, error) {
		if len(req.Messages) < 2*(loopTurns-1)+1 {
			return call, nil
		}
		return final, nil
	}}
	for _, mode := range []string{"run", "stream"} {
		b.Run(mode, func(b *testing.B) {
			a := agent.New(agent.Config{Model: m, Tools: benchTools(b), LoopGuard: agent.LoopGuard{Repeats: -1}})
			b.ReportAllocs()
			for b.Loop() {
				if mode == "run" {
					if _, err := a.Run(context.Background(), agent.Prompt("add")); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for _, err := range a.Stream(context.Background(), agent.Prompt("add")) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func modeltestResponse(reason llm.FinishReason, parts ...llm.Part) llm.Response {
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Parts: parts}, FinishReason: reason, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}}
}
