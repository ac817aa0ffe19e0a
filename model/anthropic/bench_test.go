package anthropic_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model/anthropic"
)

// stream1MB is an Anthropic stream of about 1 MB: a text block of many
// small deltas, then a tool call whose input arrives in pieces.
func stream1MB() []byte {
	var b bytes.Buffer
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":100,\"output_tokens\":1}}}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	piece, _ := json.Marshal("the quick brown fox jumps over the lazy dog, ")
	for b.Len() < 900<<10 {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%s}}\n\n", piece)
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"write_file\",\"input\":{}}}\n\n")
	arg, _ := json.Marshal(`{"path":"a.go","content":"`)
	b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":" + string(arg) + "}}\n\n")
	piece, _ = json.Marshal(`package main\nfunc main() {}\n`)
	for b.Len() < 1<<20 {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":%s}}\n\n", piece)
	}
	arg, _ = json.Marshal(`"}`)
	b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":" + string(arg) + "}}\n\n")
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":250000}}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.Bytes()
}

// replay answers every request with the same stream, without a network.
type replay []byte

func (r replay) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}, "Request-Id": {"req_1"}},
		Body:       io.NopCloser(bytes.NewReader(r)),
		Request:    req,
	}, nil
}

// BenchmarkStreamDecode1MB decodes a 1 MB stream through the adapter:
// SSE framing, event parsing and the events' fold into a Response.
func BenchmarkStreamDecode1MB(b *testing.B) {
	body := stream1MB()
	m := anthropic.New(anthropic.Config{Model: "claude", BaseURL: "http://replay", HTTPClient: &http.Client{Transport: replay(body)}})
	req := llm.Request{Messages: []llm.Message{llm.UserText("go")}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var acc llm.Accumulator
		for e, err := range m.Stream(context.Background(), req) {
			if err != nil {
				b.Fatal(err)
			}
			acc.Add(e)
		}
		if r := acc.Response(); r.Truncated || len(r.ToolCalls()) != 1 {
			b.Fatalf("bad fold: %+v", r.Usage)
		}
	}
}

// history returns n prior messages of about 1 KB each: assistant turns
// with text and a tool call, user turns with the tool result.
func history(n int) []llm.Message {
	text := strings.Repeat("Some earlier reasoning about the code base. ", 22) // ~1 KB
	msgs := []llm.Message{llm.UserText("Start working on the task.")}
	for i := 0; len(msgs) < n+1; i++ {
		id := fmt.Sprintf("toolu_%03d", i)
		msgs = append(msgs,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
				llm.Text{Text: text[:900]},
				llm.ToolCall{ID: id, Name: "read_file", Arguments: fmt.Sprintf(`{"path":"pkg/file%03d.go"}`, i)},
			}},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: id, Content: text}}},
		)
	}
	return append(msgs, llm.UserText("Now summarise."))
}

var benchTools = []llm.ToolSpec{{Name: "read_file", Description: "Read a file.", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}}

// The baseline: what a careful hand-written client does for the same call
// with net/http and encoding/json, and nothing else (no history check, no
// id sanitising, no typed errors, no idle watchdog).
type baseBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type baseMessage struct {
	Role    string      `json:"role"`
	Content []baseBlock `json:"content"`
}

type baseTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type baseRequest struct {
	Model     string        `json:"model"`
	MaxTokens int           `json:"max_tokens"`
	System    string        `json:"system,omitempty"`
	Messages  []baseMessage `json:"messages"`
	Tools     []baseTool    `json:"tools,omitempty"`
	Stream    bool          `json:"stream,omitempty"`
}

func baselineBody(req llm.Request, stream bool) []byte {
	br := baseRequest{Model: "claude", MaxTokens: 4096, System: req.System, Stream: stream}
	for _, t := range req.Tools {
		br.Tools = append(br.Tools, baseTool{t.Name, t.Description, t.Schema})
	}
	for _, m := range req.Messages {
		bm := baseMessage{Role: string(m.Role)}
		for _, p := range m.Parts {
			switch p := p.(type) {
			case llm.Text:
				bm.Content = append(bm.Content, baseBlock{Type: "text", Text: p.Text})
			case llm.ToolCall:
				bm.Content = append(bm.Content, baseBlock{Type: "tool_use", ID: p.ID, Name: p.Name, Input: json.RawMessage(p.Arguments)})
			case llm.ToolResult:
				bm.Content = append(bm.Content, baseBlock{Type: "tool_result", ToolUseID: p.CallID, Content: p.Content, IsError: p.IsError})
			}
		}
		br.Messages = append(br.Messages, bm)
	}
	body, err := json.Marshal(br)
	if err != nil {
		panic(err)
	}
	return body
}

func baselineCall(client *http.Client, url string, req llm.Request, stream bool) (string, error) {
	hreq, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(baselineBody(req, stream)))
	if err != nil {
		return "", err
	}
	hreq.Header.Set("x-api-key", "k")
	hreq.Header.Set("anthropic-version", "2023-06-01")
	hreq.Header.Set("content-type", "application/json")
	resp, err := client.Do(hreq)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if !stream {
		var msg struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			StopReason string `json:"stop_reason"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
			return "", err
		}
		var text strings.Builder
		for _, c := range msg.Content {
			text.WriteString(c.Text)
		}
		return text.String(), nil
	}
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 32<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return "", err
		}
		if ev.Type == "content_block_delta" {
			text.WriteString(ev.Delta.Text)
		}
		if ev.Type == "message_stop" {
			return text.String(), nil
		}
	}
	return "", fmt.Errorf("stream ended early: %v", sc.Err())
}

// BenchmarkRoundTrip makes the same call through the adapter and through
// the hand-written baseline against loomtest on loopback, alternating, and
// reports each one's time per call and their ratio.
func BenchmarkRoundTrip(b *testing.B) {
	answer := loomtest.Text(strings.Repeat("Here is a summary of the work so far. ", 8)).WithUsage(llm.Usage{InputTokens: 5000, OutputTokens: 80})
	answer.Chunk = 16 // about 20 text deltas in a stream
	srv := loomtest.Start(loomtest.Config{Repeat: true, NoRecord: true, Lenient: true, Turns: []loomtest.Turn{answer}})
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	m := anthropic.New(anthropic.Config{Model: "claude", APIKey: "k", BaseURL: srv.AnthropicURL(), HTTPClient: client})
	url := srv.AnthropicURL() + "/v1/messages"
	want := answer.Parts[0].(llm.Text).Text

	for _, n := range []int{0, 200} {
		req := llm.Request{System: "You are a coding agent.", Tools: benchTools, Messages: history(n)}
		for _, mode := range []string{"blocking", "stream"} {
			b.Run(fmt.Sprintf("%s/history=%d", mode, n), func(b *testing.B) {
				stream := mode == "stream"
				var adapter, baseline time.Duration
				b.ReportAllocs()
				for b.Loop() {
					t0 := time.Now()
					var text string
					if stream {
						var acc llm.Accumulator
						for e, err := range m.Stream(context.Background(), req) {
							if err != nil {
								b.Fatal(err)
							}
							acc.Add(e)
						}
						text = acc.Response().Text()
					} else {
						resp, err := m.Generate(context.Background(), req)
						if err != nil {
							b.Fatal(err)
						}
						text = resp.Text()
					}
					t1 := time.Now()
					btext, err := baselineCall(client, url, req, stream)
					if err != nil {
						b.Fatal(err)
					}
					adapter += t1.Sub(t0)
					baseline += time.Since(t1)
					if text != want || btext != want {
						b.Fatalf("answers %q / %q", text, btext)
					}
				}
				b.ReportMetric(float64(adapter.Nanoseconds())/float64(b.N), "adapter-ns/op")
				b.ReportMetric(float64(baseline.Nanoseconds())/float64(b.N), "baseline-ns/op")
				b.ReportMetric(float64(adapter)/float64(baseline), "ratio")
			})
		}
	}
}

// BenchmarkEncodeBaseline is the baseline's encoding of a 200-message
// history with encoding/json; BenchmarkEncode (internal) is the adapter's.
func BenchmarkEncodeBaseline(b *testing.B) {
	req := llm.Request{System: "You are a coding agent.", Tools: benchTools, Messages: history(200)}
	b.ReportAllocs()
	b.SetBytes(int64(len(baselineBody(req, false))))
	for b.Loop() {
		baselineBody(req, false)
	}
}
