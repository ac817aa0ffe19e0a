package postgres

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/store"
)

// The journals of record format 1 (../testdata/format1) go into the store
// and come back byte for byte, with the summaries the in-memory store
// derives.
func TestFormat1FixturesInPostgres(t *testing.T) {
	files, err := filepath.Glob("../testdata/format1/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	raw, err := os.ReadFile("../testdata/format1/conversation.json")
	if err != nil {
		t.Fatal(err)
	}
	var conv []llm.Message
	if err := json.Unmarshal(raw, &conv); err != nil {
		t.Fatal(err)
	}
	s, ref := openTest(t, nil), store.NewMemory()
	journals := map[string][]byte{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := store.ReadJournal(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		id := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		journals[id] = raw
		for _, st := range []store.Store{s, ref} {
			for _, r := range recs {
				if _, err := st.Append(ctx, id, r.Seq-1, r); err != nil {
					t.Fatalf("%s: record %d: %v", id, r.Seq, err)
				}
			}
			if err := st.AppendConversation(ctx, "conv-7", id, conv); err != nil {
				t.Fatal(err)
			}
		}
	}
	for id, raw := range journals {
		recs, err := s.Load(ctx, id, 0)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		var out bytes.Buffer
		if err := store.WriteJournal(&out, recs); err != nil {
			t.Fatal(err)
		}
		if out.String() != string(raw) {
			t.Errorf("%s: journal reads back as\n%s\nwant\n%s", id, out.String(), raw)
		}
		got, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := ref.Get(ctx, id); got != want {
			t.Errorf("%s: run info\n%+v\nthe in-memory store says\n%+v", id, got, want)
		}
	}
	got, err := s.History(ctx, "conv-7")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ref.History(ctx, "conv-7")
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) || len(got) != len(journals)*len(conv) {
		t.Errorf("the conversation reads back as\n%s\nwant\n%s", g, w)
	}
}
