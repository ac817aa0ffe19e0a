package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/loomkit/loom/store"
)

// BenchmarkAppend measures one Append of a 1 KiB record to a journal that
// already holds about history records. Its ns/op must not grow with history:
// compare history 10 with history 1000.
//
// Before the timer starts it creates b.N/k runs of history records each,
// where k is a tenth of history (at least 1); the timed loop then appends k
// records to each run in turn, so every journal stays within 10% of history
// and the database holds about 10·b.N records whatever history is. settle,
// if not nil, is called once after the setup, untimed, to let the backend
// finish work the setup caused (a SQLite backend checkpoints its write-ahead
// log), so that it is not charged to the appends.
func BenchmarkAppend(b *testing.B, s store.Store, history int, settle func()) {
	ctx := context.Background()
	payload := turnPayload(1 << 10)
	k := max(1, history/10)
	runs := (b.N + k - 1) / k
	last := make([]int64, runs)
	recs := make([]store.Record, history)
	recs[0] = store.Record{Kind: store.KindRunCreated, Data: json.RawMessage(`{"model":"m","prompt":"p"}`)}
	for i := 1; i < history; i++ {
		recs[i] = store.Record{Kind: store.KindModelTurn, Data: payload}
	}
	id := func(run int) string { return fmt.Sprintf("bench-%d-%d", history, run) }
	for run := range runs {
		var err error
		if last[run], err = s.Append(ctx, id(run), 0, recs...); err != nil {
			b.Fatal(err)
		}
	}
	if settle != nil {
		settle()
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for i := range b.N {
		run := i / k
		var err error
		if last[run], err = s.Append(ctx, id(run), last[run], store.Record{Kind: store.KindModelTurn, Data: payload}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad measures loading a whole journal of n 1 KiB records, which
// is what resuming a run costs the store.
func BenchmarkLoad(b *testing.B, s store.Store, n int) {
	ctx := context.Background()
	payload := turnPayload(1 << 10)
	recs := make([]store.Record, n)
	recs[0] = store.Record{Kind: store.KindRunCreated, Data: json.RawMessage(`{}`)}
	for i := 1; i < n; i++ {
		recs[i] = store.Record{Kind: store.KindModelTurn, Data: payload}
	}
	if _, err := s.Append(ctx, "load", 0, recs...); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(n * len(payload)))
	b.ResetTimer()
	for range b.N {
		got, err := s.Load(ctx, "load", 0)
		if err != nil || len(got) != n {
			b.Fatalf("Load: %d records, %v", len(got), err)
		}
	}
}

// turnPayload is a model_turn body of about size bytes.
func turnPayload(size int) json.RawMessage {
	text := strings.Repeat("lorem ipsum ", size/12)
	b, _ := json.Marshal(map[string]any{
		"turn":     1,
		"response": map[string]any{"message": map[string]any{"role": "assistant", "parts": []any{map[string]any{"type": "text", "text": text}}}},
	})
	return b
}
