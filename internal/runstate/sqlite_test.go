package runstate_test

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/store/sqlite"
)

// openSQLite opens a database file, closed at the end of the test.
func openSQLite(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	db, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// The journal fixtures load into the durable store unchanged: written
// back they are the same bytes, and a process that opens the database
// afresh resumes a crashed run from it as from memory.
func TestJournalsInSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	db := openSQLite(t, path)
	for _, f := range files(t, journalFixtures, "*.jsonl", 10) {
		j := loadJournal(t, filepath.Base(f[:len(f)-len(".jsonl")]))
		if _, err := db.Append(ctx, j.id, 0, j.recs...); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		back, err := db.Load(ctx, j.id, 0)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := store.WriteJournal(&b, back); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), read(t, f)) {
			t.Errorf("%s: written back from SQLite differently:\n%s", f, b.Bytes())
		}
	}
	db.Close()

	j := loadJournal(t, "crashed_in_write")
	h := resumeIn(t, openSQLite(t, path), j, recorded(t, j.recs, text(usage(1, 1), "done")), setup{}, nil)
	if h.err != nil || h.res.Output != "done" {
		t.Fatalf("Resume = %q, %v", h.res.Output, h.err)
	}
	want := []execution{{Tool: "upsert_note", Args: `{"key":"count","text":"2 Go files"}`, Key: j.id + "/1/c3"}}
	if got := h.w.executions(); !reflect.DeepEqual(got, want) {
		t.Fatalf("executions %+v, want %+v", got, want)
	}
	rs := lastResults(h.res.Messages)
	if len(rs) != 3 || rs[1].Content != agent.InterruptedMaybe {
		t.Fatalf("results = %+v", rs)
	}
	info, err := h.mem.Get(ctx, j.id)
	if err != nil || info.Status != store.StatusDone || info.Turns != 2 {
		t.Fatalf("info = %+v, %v", info, err)
	}
}
