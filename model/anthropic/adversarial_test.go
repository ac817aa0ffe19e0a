package anthropic_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/anthropic"
	"github.com/loomkit/loom/model/modeltest"
)

// hugeEvent serves a stream whose first content delta is 40 MiB: in one
// data line, or in many data lines of one event. It counts what it wrote.
func hugeEvent(written *atomic.Int64, oneLine bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_huge\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n")
		io.WriteString(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"")
		chunk := strings.Repeat("x", 1<<20)
		if !oneLine {
			// Every line is short; together they make one 40 MiB event.
			chunk = strings.Repeat(strings.Repeat("x", 64<<10)+"\ndata: ", 16)
		}
		for range 40 {
			n, err := io.WriteString(w, chunk)
			written.Add(int64(n))
			if err != nil {
				return // the client gave up, as it should
			}
		}
		io.WriteString(w, "\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}
}

// ADVERSARIAL 23: one SSE data line of 40 MiB, or one event of 40 MiB
// spread over many lines, ends the stream with a typed error at the 32 MiB
// bound, and the client holds no more than about twice the bound.
func TestStreamHugeEventIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 40 MiB")
	}
	for name, oneLine := range map[string]bool{"one line": true, "many lines": false} {
		t.Run(name, func(t *testing.T) {
			var written atomic.Int64
			srv := httptest.NewServer(hugeEvent(&written, oneLine))
			defer srv.Close()
			m := anthropic.New(anthropic.Config{APIKey: "sk-ant-test", BaseURL: srv.URL, Model: "claude-test"})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			resp, evs, err := modeltest.StreamCall(context.Background(), m, llm.Request{Messages: []llm.Message{llm.UserText("q")}})
			runtime.ReadMemStats(&after)
			var e *model.Error
			if !errors.As(err, &e) || e.Kind != model.KindInvalidResponse || !strings.Contains(err.Error(), "oversized") {
				t.Fatalf("err = %v, want an invalid_response *model.Error about an oversized event", err)
			}
			if model.IsRetryable(err) {
				t.Error("an oversized event is retryable; sending the same request again would meet it again")
			}
			if !resp.Truncated || resp.Text() != "" {
				t.Errorf("fold: truncated %v, text of %d bytes; want truncated and none of the huge delta", resp.Truncated, len(resp.Text()))
			}
			for _, ev := range evs {
				if d, ok := ev.(llm.TextDelta); ok && len(d.Text) > 0 {
					t.Errorf("a text delta of %d bytes got through", len(d.Text))
				}
			}
			// The decoder grows its buffer by doubling up to 32 MiB; the rest
			// is what HTTP and the test need.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 80<<20 {
				t.Errorf("allocated %d MiB for an event bounded at 32 MiB", alloc>>20)
			}
		})
	}
}
