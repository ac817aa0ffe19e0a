package store_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/store/storetest"
)

func BenchmarkMemoryAppend(b *testing.B) {
	for _, history := range []int{10, 1000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			storetest.BenchmarkAppend(b, store.NewMemory(), history, nil)
		})
	}
}

func BenchmarkMemoryLoad1000(b *testing.B) {
	storetest.BenchmarkLoad(b, store.NewMemory(), 1000)
}

// BenchmarkReadJournal reads a journal of 1,000 records in its portable
// form (WriteJournal's JSON Lines).
func BenchmarkReadJournal(b *testing.B) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	recs := []store.Record{{Seq: 1, Kind: store.KindRunCreated, Version: store.Version, Time: t0,
		Data: json.RawMessage(`{"model":"m","prompt":"go","conversation_id":"c1","format":1}`)}}
	for i := 2; i <= 1000; i++ {
		recs = append(recs, store.Record{Seq: int64(i), Kind: store.KindToolResult, Version: store.Version, Time: t0.Add(time.Duration(i) * time.Millisecond),
			Data: json.RawMessage(`{"turn":3,"result":{"call_id":"call_1","name":"read_file","content":"     1\tpackage main\n     2\t\n     3\tfunc main() {}\n"}}`)})
	}
	var buf bytes.Buffer
	if err := store.WriteJournal(&buf, recs); err != nil {
		b.Fatal(err)
	}
	doc := buf.Bytes()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		got, err := store.ReadJournal(bytes.NewReader(doc))
		if err != nil || len(got) != len(recs) {
			b.Fatal(len(got), err)
		}
	}
}

// BenchmarkDecodeMessage decodes a stored conversation message: an
// assistant turn with text and two tool calls.
func BenchmarkDecodeMessage(b *testing.B) {
	m := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
		llm.Text{Text: "Reading both files."},
		llm.ToolCall{ID: "call_1", Name: "read_file", Arguments: `{"path":"a.go"}`},
		llm.ToolCall{ID: "call_2", Name: "read_file", Arguments: `{"path":"b.go"}`},
	}}
	enc, err := store.EncodeConversation("c1", "r1", []llm.Message{m})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc[0])))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := store.DecodeMessage("c1", 0, enc[0]); err != nil {
			b.Fatal(err)
		}
	}
}
