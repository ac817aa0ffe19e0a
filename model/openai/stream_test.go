package openai_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/internal/pipenet"
	"github.com/loomkit/loom/model/openai"
)

// TestPathologicalStreams runs the committed corpus of broken and odd
// streams under testdata/streams. Each case says what must come out.
func TestPathologicalStreams(t *testing.T) {
	type outcome struct {
		kind      model.Kind // the error's kind, "" for success
		text      string
		thinking  string
		calls     []llm.ToolCall
		finish    llm.FinishReason
		truncated bool
		usage     llm.Usage
	}
	cases := map[string]outcome{
		// ADVERSARIAL 24: interleaved parallel calls.
		"interleaved_calls.sse": {finish: llm.FinishToolCalls, calls: []llm.ToolCall{
			{ID: "call_a", Name: "read_file", Arguments: `{"path":"a.go"}`},
			{ID: "call_b", Name: "read_file", Arguments: `{"path":"b.go"}`},
		}},
		// ADVERSARIAL 26: a name split across chunks.
		"split_name.sse": {finish: llm.FinishToolCalls, calls: []llm.ToolCall{
			{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
		}},
		// Glued JSON: copies and empty placeholders reduce, others are
		// malformed, never guessed.
		"glued_arguments.sse": {finish: llm.FinishToolCalls, calls: []llm.ToolCall{
			{ID: "c1", Name: "a", Arguments: `{"x":1}`},
			{ID: "c2", Name: "b", Arguments: `{"x":1}{"y":2}`, Malformed: true},
		}},
		// ADVERSARIAL 15: cut after argument fragments, no finish, no [DONE].
		"cut_mid_arguments.sse": {kind: model.KindTruncatedStream, text: "Reading", truncated: true, calls: []llm.ToolCall{
			{ID: "call_1", Name: "read_file", Arguments: `{"path":"a.`, Malformed: true, Incomplete: true},
		}},
		// A finish_reason, then the connection closed cleanly without
		// [DONE]: accepted as complete (the answer is whole).
		"finish_without_done.sse": {text: "All done.", finish: llm.FinishStop},
		// [DONE] without any finish_reason: the end marker is what counts.
		"done_without_finish.sse": {text: "short"},
		// ADVERSARIAL 25: index -1, a sparse index and a choice index of 500.
		"odd_indexes.sse": {finish: llm.FinishToolCalls, text: "kept", calls: []llm.ToolCall{
			{ID: "neg", Name: "a", Arguments: `{}`},
			{ID: "far", Name: "b", Arguments: `{"n":1000}`},
		}},
		// ADVERSARIAL 18: an error chunk after HTTP 200, classified by type.
		"error_chunk.sse":       {kind: model.KindServer, text: "Partial", truncated: true},
		"error_chunk_quota.sse": {kind: model.KindQuota, truncated: true},
		"error_event.sse":       {kind: model.KindOverloaded, truncated: true},
		// ADVERSARIAL 21: unknown event types are ignored.
		"unknown_events.sse": {text: "fine", finish: llm.FinishStop},
		// ADVERSARIAL 22: CRLF, no space after "data:", comments, data
		// split over lines.
		"crlf_comments_multiline.sse": {text: "Hello there", finish: llm.FinishStop, usage: llm.Usage{InputTokens: 3, OutputTokens: 2}},
		// ADVERSARIAL 16: the last event is not followed by a blank line.
		"no_final_blank_line.sse": {text: "end", finish: llm.FinishStop, usage: llm.Usage{InputTokens: 1, OutputTokens: 1}},
		// ADVERSARIAL 29: finish_reason length inside a tool call.
		"length_in_call.sse": {finish: llm.FinishLength, calls: []llm.ToolCall{
			{ID: "c1", Name: "write_file", Arguments: `{"content":"abc`, Malformed: true, Incomplete: true},
		}},
		"not_json.sse":         {kind: model.KindInvalidResponse, truncated: true},
		"data_after_done.sse":  {text: "first", finish: llm.FinishStop},
		"usage_details.sse":    {text: "ok", finish: llm.FinishStop, usage: llm.Usage{InputTokens: 50, OutputTokens: 7, CacheReadTokens: 32, ReasoningTokens: 5}},
		"reasoning_stream.sse": {thinking: "step one, step two", text: "42", finish: llm.FinishStop},
		"repeated_id_and_name.sse": {finish: llm.FinishToolCalls, calls: []llm.ToolCall{
			{ID: "call_r", Name: "search", Arguments: `{"q":"go"}`},
		}},
		"empty.sse": {kind: model.KindTruncatedStream, truncated: true},
	}
	files, err := filepath.Glob("testdata/streams/*.sse")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(cases) {
		t.Errorf("%d files in testdata/streams, %d cases", len(files), len(cases))
	}
	for _, file := range files {
		name := filepath.Base(file)
		want, ok := cases[name]
		if !ok {
			t.Errorf("%s has no expectation", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := start(t, openai.Config{}, reply(200, "text/event-stream", string(body)))
			resp, _, err := collect(m.Stream(bg, userReq("q")))
			if kindOf(err) != want.kind || (want.kind == "" && err != nil) {
				t.Fatalf("error %v, want kind %q", err, want.kind)
			}
			if resp.Text() != want.text || resp.FinishReason != want.finish || resp.Truncated != want.truncated || resp.Usage != want.usage {
				t.Errorf("text %q finish %q truncated %v usage %+v", resp.Text(), resp.FinishReason, resp.Truncated, resp.Usage)
			}
			var thinking string
			for _, p := range resp.Message.Parts {
				if th, ok := p.(llm.Thinking); ok {
					thinking += th.Text
				}
			}
			if thinking != want.thinking {
				t.Errorf("thinking %q", thinking)
			}
			calls := resp.ToolCalls()
			if len(calls) != len(want.calls) {
				t.Fatalf("calls %+v, want %+v", calls, want.calls)
			}
			for i := range calls {
				if calls[i] != want.calls[i] {
					t.Errorf("call %d: %+v, want %+v", i, calls[i], want.calls[i])
				}
			}
		})
	}
}

func TestStreamHTMLAndJSONBodies(t *testing.T) {
	// ADVERSARIAL 13: a proxy's HTML page with 200.
	m, _ := start(t, openai.Config{}, reply(200, "text/html; charset=utf-8", "<!DOCTYPE html><html><title>Service Unavailable</title></html>"))
	_, evs, err := collect(m.Stream(bg, userReq("q")))
	if kindOf(err) != model.KindInvalidResponse || !strings.Contains(err.Error(), "Service Unavailable") || len(evs) != 0 {
		t.Fatalf("html: %v %v", evs, err)
	}
	// A server that ignored "stream": a whole completion, replayed.
	m, _ = start(t, openai.Config{}, jsonReply(200, parity[1].blocking))
	resp, _, err := collect(m.Stream(bg, userReq("q")))
	if err != nil || len(resp.ToolCalls()) != 2 || resp.FinishReason != llm.FinishToolCalls {
		t.Fatalf("json: %+v %v", resp, err)
	}
	// A JSON error with 200.
	m, _ = start(t, openai.Config{}, jsonReply(200, `{"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"maximum context length"}}`))
	if _, _, err := collect(m.Stream(bg, userReq("q"))); kindOf(err) != model.KindContextTooLong {
		t.Fatalf("json error: %v", err)
	}
}

// TestStreamHugeLine: one data line of 40 MiB (ADVERSARIAL 23) fails with
// a bounded error.
func TestStreamHugeLine(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 40 MiB")
	}
	m, _ := start(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"`)
		chunk := strings.Repeat("x", 1<<20)
		for range 40 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return // the client gave up, as it should
			}
		}
		io.WriteString(w, "\"}}]}\n\ndata: [DONE]\n\n")
	})
	_, evs, err := collect(m.Stream(bg, userReq("q")))
	if kindOf(err) != model.KindInvalidResponse || len(evs) != 0 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
}

func TestStreamSingleUseAndBreak(t *testing.T) {
	m, f := start(t, openai.Config{}, sseReply(parity[0].stream))
	seq := m.Stream(bg, userReq("q"))
	n := 0
	for range seq {
		n++
		break
	}
	_, evs, err := collect(seq)
	if n != 1 || err == nil || len(evs) != 0 || len(f.requests()) != 1 {
		t.Fatalf("n %d, second range %v %v, %d requests", n, evs, err, len(f.requests()))
	}
}

// TestStreamConnectionBreaks: a connection that dies mid-stream is a
// truncated stream, with what arrived before it kept.
func TestStreamConnectionBreaks(t *testing.T) {
	m, _ := start(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"}}]}\n\n")
		w.(http.Flusher).Flush()
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			c.Close()
		}
	})
	resp, _, err := collect(m.Stream(bg, userReq("q")))
	if kindOf(err) != model.KindTruncatedStream || !model.IsRetryable(err) || resp.Text() != "half" || !resp.Truncated {
		t.Fatalf("%+v %v", resp, err)
	}
}

// TestStreamIdle: headers, one keep-alive, then silence (ADVERSARIAL 19):
// the idle watchdog ends the stream 90 s after the last byte.
func TestStreamIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, stop := pipenet.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Second)
			io.WriteString(w, ": keep-alive\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}))
		defer stop()
		m := openai.New(openai.Config{Model: "m", BaseURL: "http://pipenet/v1", HTTPClient: client})
		start := time.Now()
		resp, _, err := collect(m.Stream(bg, userReq("q")))
		if kindOf(err) != model.KindTimeout || resp.Text() != "hi" {
			t.Fatalf("%+v %v", resp, err)
		}
		if got := time.Since(start); got != 100*time.Second {
			t.Fatalf("ended after %v, want 1m40s", got)
		}
	})
}

// TestCallTimeout: a server that never answers a blocking call is cut off
// by Config.Timeout (ADVERSARIAL 11), and the caller's deadline is kept.
func TestCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, stop := pipenet.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		}))
		defer stop()
		m := openai.New(openai.Config{Model: "m", BaseURL: "http://pipenet/v1", HTTPClient: client, Timeout: time.Minute})
		start := time.Now()
		_, err := m.Generate(bg, userReq("q"))
		if kindOf(err) != model.KindTimeout || time.Since(start) != time.Minute {
			t.Fatalf("after %v: %v", time.Since(start), err)
		}
		ctx, cancel := contextWithTimeout(5 * time.Second)
		defer cancel()
		start = time.Now()
		_, err = m.Generate(ctx, userReq("q"))
		if kindOf(err) != model.KindTimeout || !errors.Is(err, errDeadline) || time.Since(start) != 5*time.Second {
			t.Fatalf("after %v: %v", time.Since(start), err)
		}
	})
}
