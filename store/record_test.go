package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomkit/loom/store"
)

func TestNewRecordAndDecode(t *testing.T) {
	type turn struct {
		Turn int    `json:"turn"`
		Text string `json:"text"`
	}
	r, err := store.NewRecord(store.KindModelTurn, turn{3, "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != store.KindModelTurn || string(r.Data) != `{"turn":3,"text":"hi"}` {
		t.Fatalf("NewRecord = %+v", r)
	}
	var got turn
	if err := r.Decode(&got); err != nil || got != (turn{3, "hi"}) {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
	if _, err := store.NewRecord(store.KindNote, make(chan int)); err == nil || !strings.Contains(err.Error(), "note") {
		t.Fatalf("NewRecord of an unencodable value: %v", err)
	}
	r.Seq = 9
	var wrong []string
	if err := r.Decode(&wrong); err == nil || !strings.Contains(err.Error(), "model_turn record 9") {
		t.Fatalf("Decode into the wrong type: %v, want an error naming the record", err)
	}
}

func TestPromptSummary(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ prompt, want string }{
		{"", ""},
		{"one line", "one line"},
		{"  padded  ", "padded"},
		{"first\r\nsecond", "first"},
		{"\n\nleading newlines", "leading newlines"},
		{"bad \xff utf8\nrest", "bad \uFFFD utf8"},
		{strings.Repeat("a", store.MaxPromptSummary), strings.Repeat("a", store.MaxPromptSummary)},
		{strings.Repeat("a", store.MaxPromptSummary+1), strings.Repeat("a", store.MaxPromptSummary-len("…")) + "…"},
	} {
		s := store.NewMemory()
		r, _ := store.NewRecord(store.KindRunCreated, store.RunHeader{Prompt: c.prompt})
		if _, err := s.Append(ctx, "r", 0, r); err != nil {
			t.Fatal(err)
		}
		info, _ := s.Get(ctx, "r")
		if info.Prompt != c.want {
			t.Errorf("prompt %q summarized as %q, want %q", c.prompt, info.Prompt, c.want)
		}
	}
}
