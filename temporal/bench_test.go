package temporal

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
)

// benchHistory returns a transcript of n turns of a tool call and a 5 KB
// result each.
func benchHistory(n int) []llm.Message {
	hist := []llm.Message{llm.UserText("go")}
	for i := range n {
		hist = append(hist,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "read", Arguments: `{"path":"a.go"}`}}},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: fmt.Sprintf("c%d", i), Content: strings.Repeat(fmt.Sprintf("line %d\n", i), 700)}}},
		)
	}
	return hist
}

// BenchmarkTranscriptDelta is the workflow's cost of preparing a model
// call's input after one more turn: it must not grow with the history.
func BenchmarkTranscriptDelta(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("turns=%d", n), func(b *testing.B) {
			hist := benchHistory(n)
			st := &transcriptState{}
			r := &resolver{cache: newBlobCache(&MemoryBlobs{}, 1<<30)}
			ref, _ := st.delta(hist[:len(hist)-2])
			if _, err := r.transcript(context.Background(), ref); err != nil {
				b.Fatal(err)
			}
			st.advance(ref, "")
			for b.Loop() {
				if _, err := st.delta(hist); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTranscriptResolve is a worker's cost of assembling a model
// call's transcript from a warm cache after one more turn: a slice of the
// whole history (it is the request), no decoding of old messages.
func BenchmarkTranscriptResolve(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("turns=%d", n), func(b *testing.B) {
			hist := benchHistory(n)
			st := &transcriptState{}
			r := &resolver{cache: newBlobCache(&MemoryBlobs{}, 1<<30)}
			ref, _ := st.delta(hist[:len(hist)-2])
			if _, err := r.transcript(context.Background(), ref); err != nil {
				b.Fatal(err)
			}
			st.advance(ref, "")
			ref, _ = st.delta(hist)
			ref = roundTrip(b, ref)
			for b.Loop() {
				if _, err := r.transcript(context.Background(), ref); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
