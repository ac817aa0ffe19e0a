package sqlite

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/store"
)

var update = flag.Bool("update", false, "rewrite testdata/schema1.db from ../testdata/format1")

type fixture struct {
	id   string
	raw  []byte
	recs []store.Record
}

func format1Fixtures(t *testing.T) ([]fixture, []llm.Message) {
	t.Helper()
	files, err := filepath.Glob("../testdata/format1/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var out []fixture
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := store.ReadJournal(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, fixture{strings.TrimSuffix(filepath.Base(f), ".jsonl"), raw, recs})
	}
	raw, err := os.ReadFile("../testdata/format1/conversation.json")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []llm.Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatal(err)
	}
	return out, msgs
}

func replay(t *testing.T, s store.Store, fixtures []fixture, conv []llm.Message) {
	t.Helper()
	for _, f := range fixtures {
		for _, r := range f.recs {
			if _, err := s.Append(ctx, f.id, r.Seq-1, r); err != nil {
				t.Fatalf("%s: record %d: %v", f.id, r.Seq, err)
			}
		}
	}
	if err := s.AppendConversation(ctx, "conv-7", "finished", conv); err != nil {
		t.Fatal(err)
	}
}

// checkFixtures checks that s holds the fixtures exactly: each journal
// written back gives the fixture's bytes, each summary equals the one the
// in-memory store derives, and the conversation is intact.
func checkFixtures(t *testing.T, s store.Store, fixtures []fixture, conv []llm.Message) {
	t.Helper()
	ref := store.NewMemory()
	replay(t, ref, fixtures, conv)
	for _, f := range fixtures {
		recs, err := s.Load(ctx, f.id, 0)
		if err != nil {
			t.Fatalf("%s: %v", f.id, err)
		}
		var out bytes.Buffer
		if err := store.WriteJournal(&out, recs); err != nil {
			t.Fatal(err)
		}
		if out.String() != string(f.raw) {
			t.Errorf("%s: journal reads back as\n%s\nwant\n%s", f.id, out.String(), f.raw)
		}
		got, err := s.Get(ctx, f.id)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.Get(ctx, f.id)
		if got != want {
			t.Errorf("%s: run info\n%+v\nthe in-memory store says\n%+v", f.id, got, want)
		}
	}
	hist, err := s.History(ctx, "conv-7")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(hist)
	w, _ := json.Marshal(conv)
	if string(g) != string(w) {
		t.Errorf("conversation reads back as\n%s\nwant\n%s", g, w)
	}
	list, err := s.List(ctx, store.Filter{})
	if err != nil || len(list) != len(fixtures) {
		t.Fatalf("List: %d runs (%v), want %d", len(list), err, len(fixtures))
	}
}

func TestFormat1FixturesInSQLite(t *testing.T) {
	fixtures, conv := format1Fixtures(t)
	s := mustOpen(t, filepath.Join(t.TempDir(), "loom.db"))
	replay(t, s, fixtures, conv)
	checkFixtures(t, s, fixtures, conv)
}

// testdata/schema1.db was written by the first release of this schema; every
// later build must open it (migrating it if the schema moved on) and read
// the same journals from it.
func TestSchema1Database(t *testing.T) {
	fixtures, conv := format1Fixtures(t)
	const golden = "testdata/schema1.db"
	if *update {
		if SchemaVersion() != 1 {
			t.Fatal("schema1.db must be written by a build whose schema is version 1")
		}
		path := filepath.Join(t.TempDir(), "schema1.db")
		s := mustOpen(t, path)
		replay(t, s, fixtures, conv)
		if _, err := s.db.Exec(`VACUUM`); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path + "-wal"); err == nil {
			t.Fatal("the write-ahead log was not checkpointed on close")
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	path := filepath.Join(t.TempDir(), "loom.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, path)
	checkFixtures(t, s, fixtures, conv)
	// The old database takes new records, and new runs with metadata,
	// which its runs did not have.
	if _, err := s.Append(ctx, "finished", 6, note(`"after"`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "with-meta", 0, created(t, store.RunHeader{Meta: json.RawMessage(`{"k":"v"}`)})); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"finished": "", "with-meta": `{"k":"v"}`} {
		if info, err := s.Get(ctx, id); err != nil || info.Meta != want {
			t.Errorf("Get(%s): meta %q (%v), want %q", id, info.Meta, err, want)
		}
	}
}
