package anthropic_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model/anthropic"
	"github.com/loomkit/loom/model/modeltest"
)

// message is a blocking Messages body with the given usage object.
func message(usage string) string {
	return `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",
"content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","stop_sequence":null,"usage":` + usage + `}`
}

// stream is a Messages stream whose message_start and final message_delta
// carry the given usage objects.
func stream(start, final string) string {
	return `event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":` + start + `}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Done."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":` + final + `}

event: message_stop
data: {"type":"message_stop"}

`
}

// usageOf returns the usage of a blocking call answered by body and of a
// streaming call answered by sse.
func usageOf(t *testing.T, body, sse string) (blocking, streamed llm.Usage) {
	t.Helper()
	srv := start(t, loomtest.Turn{Body: body, ContentType: "application/json"}, loomtest.RawStream(sse))
	m := newModel(srv, anthropic.Config{Model: "claude-sonnet-4-5-20250929"})
	req := llm.Request{Messages: []llm.Message{llm.UserText("go on")}}
	b, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	s, _, err := modeltest.StreamCall(context.Background(), m, req)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	return b.Usage, s.Usage
}

// The final message_delta's usage is cumulative and complete: a count it
// reports as 0 replaces what message_start said, as in the blocking body
// (here a compaction turn, whose first iteration read 55,096 tokens from
// the cache and whose answer read none).
func TestStreamUsageReportedZeroWins(t *testing.T) {
	final := `{"input_tokens":2503,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":812}`
	b, s := usageOf(t, message(final),
		stream(`{"input_tokens":8,"cache_creation_input_tokens":0,"cache_read_input_tokens":55096,"output_tokens":1,"service_tier":"standard"}`, final))
	want := llm.Usage{InputTokens: 2503, OutputTokens: 812}
	if b != want || s != want {
		t.Fatalf("blocking %+v, stream %+v; want both %+v", b, s, want)
	}
	// A message_delta that reports output only (the older form) keeps
	// the counts of message_start.
	b, s = usageOf(t,
		message(`{"input_tokens":8,"cache_creation_input_tokens":0,"cache_read_input_tokens":55096,"output_tokens":812}`),
		stream(`{"input_tokens":8,"cache_creation_input_tokens":0,"cache_read_input_tokens":55096,"output_tokens":1}`, `{"output_tokens":812}`))
	want = llm.Usage{InputTokens: 8 + 55096, OutputTokens: 812, CacheReadTokens: 55096}
	if b != want || s != want {
		t.Fatalf("output-only delta: blocking %+v, stream %+v; want both %+v", b, s, want)
	}
}

// Anthropic's input_tokens leaves cached input out; llm.Usage.InputTokens
// counts it, so the total and the price are right without knowing the
// provider: 5,000 uncached + 3,000 cache-read input and 100 output tokens
// on claude-sonnet-4-5 cost $0.0174 (5,000 × $3 + 3,000 × $0.30 + 100 ×
// $15 per million), and 2,000 more written to the cache $0.0075 more.
func TestUsageConventionAnthropic(t *testing.T) {
	price, ok := agent.Budget{}.PriceOf("claude-sonnet-4-5-20250929")
	if !ok {
		t.Fatal("no price for claude-sonnet-4-5")
	}
	for _, c := range []struct {
		usage string
		total int64
		cost  float64
	}{
		{`{"input_tokens":5000,"cache_creation_input_tokens":0,"cache_read_input_tokens":3000,"output_tokens":100}`, 8100, 0.0174},
		{`{"input_tokens":5000,"cache_creation_input_tokens":2000,"cache_read_input_tokens":3000,"output_tokens":100}`, 10100, 0.0249},
	} {
		b, s := usageOf(t, message(c.usage), stream(strings.Replace(c.usage, `"output_tokens":100`, `"output_tokens":1`, 1), c.usage))
		for mode, u := range map[string]llm.Usage{"blocking": b, "stream": s} {
			if u.Total() != c.total {
				t.Errorf("%s %s: Total %d, want %d", mode, c.usage, u.Total(), c.total)
			}
			if got := price.Cost(u); got-c.cost > 1e-9 || c.cost-got > 1e-9 {
				t.Errorf("%s %s: cost $%.6f, want $%.4f", mode, c.usage, got, c.cost)
			}
		}
	}
}
