package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/internal/sse"
	"github.com/loomkit/loom/model/internal/wire"
)

// parse runs an SSE body through the decoder and the parser, as the
// adapter does after the HTTP exchange, keeping every event.
func parse(body []byte, maxLine int) (llm.Response, []llm.Event, error) {
	return parseKeep(body, maxLine, true)
}

func parseKeep(body []byte, maxLine int, keep bool) (llm.Response, []llm.Event, error) {
	dec := sse.NewDecoderSize(bytes.NewReader(body), maxLine)
	p := newParser(opStream, http.Header{}, defaultLimits)
	var acc llm.Accumulator
	var all []llm.Event
	var evs []llm.Event
	for {
		sev, err := dec.Next()
		if err == io.EOF {
			evs, err = p.end(evs[:0])
			if keep {
				all = append(all, evs...)
			}
			for _, e := range evs {
				acc.Add(e)
			}
			return acc.Response(), all, err
		}
		if err != nil {
			return acc.Response(), all, p.readError(err)
		}
		evs, err = p.feed(sev, evs[:0])
		if keep {
			all = append(all, evs...)
		}
		for _, e := range evs {
			acc.Add(e)
		}
		if err != nil || p.done {
			return acc.Response(), all, err
		}
	}
}

func FuzzStreamParser(f *testing.F) {
	files, _ := filepath.Glob("testdata/streams/*.sse")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":-7,\"function\":{\"arguments\":\"{\"}}]}}]}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":9223372036854775807,\"id\":\"x\"}]},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]"))
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, evs, err := parse(body, 1<<16)
		finished := false
		for _, e := range evs {
			if e == nil {
				t.Fatal("nil event")
			}
			if finished {
				t.Fatalf("event %T after Finish", e)
			}
			if _, ok := e.(llm.Finish); ok {
				finished = true
			}
		}
		if err != nil {
			var me *model.Error
			if !errors.As(err, &me) || me.Kind == "" {
				t.Fatalf("untyped error %v", err)
			}
			if finished {
				t.Fatalf("error %v after Finish", err)
			}
			return
		}
		if !finished || resp.Truncated {
			t.Fatalf("clean end without Finish: %v", evs)
		}
		for _, c := range resp.ToolCalls() {
			if !c.Malformed && c.ArgumentsError() != nil {
				t.Fatalf("call %+v has bad arguments but is not Malformed", c)
			}
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(`{"id":"x","choices":[{"index":0,"message":{"content":"hi","tool_calls":[{"id":"a","function":{"name":"n","arguments":"{\"a\":1}{\"a\":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1}}`))
	f.Add([]byte(`{"error":{"type":"overloaded_error"}}`))
	f.Add([]byte(`<html>`))
	f.Add([]byte(`{"choices":[{"index":3}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}}
		r, err := decodeResponse(opGenerate, resp, body, defaultLimits)
		if err != nil {
			if model.KindOf(err) == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, c := range r.ToolCalls() {
			if !c.Malformed && c.ArgumentsError() != nil {
				t.Fatalf("call %+v has bad arguments but is not Malformed", c)
			}
		}
		if !bytes.Equal(r.Raw, body) {
			t.Fatal("Raw is not the body")
		}
	})
}

// TestParserLineBound: the adapter's decoder bound holds through the
// parser and gives a typed error.
func TestParserLineBound(t *testing.T) {
	body := []byte("data: " + strings.Repeat("x", 200) + "\n\n")
	_, _, err := parse(body, 100)
	if model.KindOf(err) != model.KindInvalidResponse || !errors.Is(err, sse.ErrLineTooLong) {
		t.Fatalf("got %v", err)
	}
}

// streamOf1MB is a realistic stream of about 1 MB: text deltas, then two
// parallel tool calls in fragments, a finish, usage and [DONE].
func streamOf1MB() []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < 1<<20-4096; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-B9\",\"object\":\"chat.completion.chunk\",\"created\":1727000000,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token %d and some more text \"},\"logprobs\":null,\"finish_reason\":null}]}\n\n", i)
		} else {
			fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-B9\",\"object\":\"chat.completion.chunk\",\"created\":1727000000,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,\"function\":{\"arguments\":\"\\\"k%d\\\":1,\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n", i%4/2, i)
		}
		if i == 0 {
			b.WriteString("data: {\"id\":\"chatcmpl-B9\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_0\",\"type\":\"function\",\"function\":{\"name\":\"a\",\"arguments\":\"{\"}},{\"index\":1,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"b\",\"arguments\":\"{\"}}]}}]}\n\n")
		}
	}
	b.WriteString("data: {\"id\":\"chatcmpl-B9\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"z\\\":0}\"}},{\"index\":1,\"function\":{\"arguments\":\"\\\"z\\\":0}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n")
	b.WriteString("data: {\"id\":\"chatcmpl-B9\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":9000}}\n\ndata: [DONE]\n\n")
	return b.Bytes()
}

func TestStreamOf1MBParses(t *testing.T) {
	resp, _, err := parse(streamOf1MB(), 0)
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.ToolCalls()
	if len(calls) != 2 || calls[0].Malformed || calls[1].Malformed || resp.Truncated || resp.Usage.OutputTokens != 9000 {
		t.Fatalf("calls %d, %+v", len(calls), resp.Usage)
	}
}

// BenchmarkParseStream1MB decodes a 1 MB stream (SSE decoder, chunk JSON,
// events, accumulator), without HTTP.
func BenchmarkParseStream1MB(b *testing.B) {
	body := streamOf1MB()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := parseKeep(body, 0, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeRequest200 encodes a request with 200 prior messages of
// about 1 KB each.
func BenchmarkEncodeRequest200(b *testing.B) {
	m := New(Config{Model: "gpt-x"})
	req := llm.Request{System: "You are terse."}
	text := strings.Repeat("lorem ipsum ", 85)
	for i := range 100 {
		req.Messages = append(req.Messages, llm.UserText(text),
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text{Text: text}}})
		_ = i
	}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		body, err := m.encodeRequest(opGenerate, req, false)
		if err != nil {
			b.Fatal(err)
		}
		n = len(body)
	}
	b.SetBytes(int64(n))
}

func serve1MB(b *testing.B) (*httptest.Server, []byte) {
	body := streamOf1MB()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv, body
}

// BenchmarkStream1MBHTTP streams the 1 MB body through the adapter over
// loopback HTTP and folds it.
func BenchmarkStream1MBHTTP(b *testing.B) {
	srv, body := serve1MB(b)
	m := New(Config{Model: "gpt-x", BaseURL: srv.URL, HTTPClient: srv.Client()})
	req := llm.Request{Messages: []llm.Message{llm.UserText("go")}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var acc llm.Accumulator
		for ev, err := range m.Stream(context.Background(), req) {
			if err != nil {
				b.Fatal(err)
			}
			acc.Add(ev)
		}
		if acc.Response().Truncated {
			b.Fatal("truncated")
		}
	}
}

// BenchmarkStream1MBHandWritten is the baseline for BenchmarkStream1MBHTTP:
// a minimal hand-written client posting the same body and decoding each
// chunk into a small struct, without events, checks or an accumulator.
func BenchmarkStream1MBHandWritten(b *testing.B) {
	srv, body := serve1MB(b)
	client := srv.Client()
	reqBody := []byte(`{"model":"gpt-x","messages":[{"role":"user","content":"go"}],"stream":true,"stream_options":{"include_usage":true}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Post(srv.URL+"/chat/completions", "application/json", bytes.NewReader(reqBody))
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 32<<20)
		var text strings.Builder
		args := map[int]*strings.Builder{}
		for sc.Scan() {
			line := sc.Bytes()
			if !bytes.HasPrefix(line, []byte("data: ")) || bytes.Equal(line[6:], []byte("[DONE]")) {
				continue
			}
			var c struct {
				Choices []struct {
					Delta struct {
						Content   string `json:"content"`
						ToolCalls []struct {
							Index    int `json:"index"`
							Function struct {
								Arguments string `json:"arguments"`
							} `json:"function"`
						} `json:"tool_calls"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(line[6:], &c); err != nil {
				b.Fatal(err)
			}
			for _, ch := range c.Choices {
				text.WriteString(ch.Delta.Content)
				for _, tc := range ch.Delta.ToolCalls {
					if args[tc.Index] == nil {
						args[tc.Index] = &strings.Builder{}
					}
					args[tc.Index].WriteString(tc.Function.Arguments)
				}
			}
		}
		resp.Body.Close()
		if len(args) != 2 {
			b.Fatal(len(args))
		}
	}
}

var defaultLimits = wire.ResolveAnswerLimits(0, 0, 0)
