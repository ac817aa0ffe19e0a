package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/loomkit/loom/store"
)

var ctx = context.Background()

func mustOpen(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, nil)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func created(t *testing.T, h store.RunHeader) store.Record {
	t.Helper()
	r, err := store.NewRecord(store.KindRunCreated, h)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func note(data string) store.Record {
	return store.Record{Kind: store.KindNote, Data: []byte(data)}
}

func pragma(t *testing.T, s *Store, name string) string {
	t.Helper()
	var v string
	if err := s.db.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

func TestDefaultPath(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the XDG layout applies to Unix systems")
	}
	t.Setenv("XDG_STATE_HOME", "/state/home")
	if p, err := DefaultPath(); err != nil || p != "/state/home/loom/loom.db" {
		t.Fatalf("with XDG_STATE_HOME set: %q, %v", p, err)
	}
	t.Setenv("HOME", "/home/someone")
	for _, xdg := range []string{"", "relative/state"} { // the XDG spec says to ignore relative paths
		t.Setenv("XDG_STATE_HOME", xdg)
		if p, err := DefaultPath(); err != nil || p != "/home/someone/.local/state/loom/loom.db" {
			t.Fatalf("with XDG_STATE_HOME=%q: %q, %v", xdg, p, err)
		}
	}
	t.Setenv("HOME", "")
	if p, err := DefaultPath(); err == nil {
		t.Fatalf("without HOME or XDG_STATE_HOME: %q, want an error", p)
	}
}

func TestOpenCreatesAPrivateDatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a", "b", "loom.db")
	s := mustOpen(t, path)
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("database file mode %v, want 0600", m)
		}
		di, err := os.Stat(filepath.Join(dir, "a", "b"))
		if err != nil {
			t.Fatal(err)
		}
		if m := di.Mode().Perm(); m != 0o700 {
			t.Errorf("created directory mode %v, want 0700", m)
		}
	}
	for name, want := range map[string]string{
		"journal_mode":   "wal",
		"foreign_keys":   "1",
		"busy_timeout":   "10000",
		"synchronous":    "2", // FULL
		"application_id": fmt.Sprint(applicationID),
	} {
		if got := pragma(t, s, name); got != want {
			t.Errorf("PRAGMA %s = %s, want %s", name, got, want)
		}
	}
	var version int
	if err := s.db.QueryRow(`SELECT max(version) FROM schema_migrations`).Scan(&version); err != nil || version != SchemaVersion() {
		t.Fatalf("schema version %d (%v), want %d", version, err, SchemaVersion())
	}
	// The journal is indexed by (run_id, seq): a lookup never scans.
	var plan strings.Builder
	rows, err := s.db.Query(`EXPLAIN QUERY PLAN SELECT seq FROM records WHERE run_id = 'r' AND seq > 5 ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(detail + "\n")
	}
	rows.Close()
	if p := plan.String(); !strings.Contains(p, "USING") || strings.Contains(p, "SCAN") || strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("loading a journal tail is not an index range scan:\n%s", p)
	}

	s2 := mustOpen(t, filepath.Join(dir, "busy.db"))
	s2.Close()
	s3, err := Open(filepath.Join(dir, "busy.db"), &Options{BusyTimeout: 1500e6})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if got := pragma(t, s3, "busy_timeout"); got != "1500" {
		t.Errorf("Options.BusyTimeout 1.5s gives busy_timeout %s", got)
	}
}

func TestOpenBadPaths(t *testing.T) {
	if _, err := Open("", nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Open(\"\"): %v, want ErrInvalid", err)
	}
	dir := t.TempDir()
	// A parent that is a file.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(file, "loom.db"), nil); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("Open under a regular file: %v, want an error naming the path", err)
	}
	// A file that is not a database.
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("not a database\n", 200)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(text, nil)
	if err == nil || !strings.Contains(err.Error(), "not a SQLite database") {
		t.Errorf("Open of a text file: %v, want an error saying it is not a database", err)
	}
	if b, _ := os.ReadFile(text); !strings.HasPrefix(string(b), "not a database") {
		t.Errorf("Open changed a file that is not a database")
	}
	// A path with characters that mean something in a URI.
	odd := filepath.Join(dir, "we?ird #dir%20", "loom.db")
	s := mustOpen(t, odd)
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(odd); err != nil {
		t.Errorf("database not created at the exact path %q: %v", odd, err)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	s := mustOpen(t, path)
	last, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{Model: "m", Prompt: "p", ConversationID: "c"}), note(`1`), note(`2`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, path)
	info, err := s.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if info.LastSeq != last || info.Model != "m" || info.ConversationID != "c" {
		t.Fatalf("reopened run info %+v", info)
	}
	if _, err := s.Append(ctx, "r", last, note(`3`)); err != nil {
		t.Fatalf("append after reopen: %v", err)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	s := mustOpen(t, path)
	if _, err := s.db.Exec(`INSERT INTO schema_migrations (version, applied) VALUES (?, 0)`, SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(path, nil)
	var se *SchemaError
	if !errors.As(err, &se) || !errors.Is(err, store.ErrVersion) {
		t.Fatalf("Open of a newer database: %v, want a *SchemaError matching store.ErrVersion", err)
	}
	if se.Found != SchemaVersion()+1 || se.Supported != SchemaVersion() || se.Path != path {
		t.Fatalf("SchemaError %+v", *se)
	}
	if msg := err.Error(); !strings.Contains(msg, "upgrade loom") || !strings.Contains(msg, path) {
		t.Errorf("schema error %q does not say where and what to do", msg)
	}
}

func TestMigrationsUpgradeOldDatabases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	s := mustOpen(t, path)
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{Model: "m"}), note(`"kept"`)); err != nil {
		t.Fatal(err)
	}
	s.Close()

	saved := migrations
	t.Cleanup(func() { migrations = saved })
	migrations = append(slicesClone(saved), `ALTER TABLE runs ADD COLUMN label TEXT NOT NULL DEFAULT 'none'`)
	s = mustOpen(t, path)
	var version int
	var label string
	if err := s.db.QueryRow(`SELECT max(version) FROM schema_migrations`).Scan(&version); err != nil || version != len(saved)+1 {
		t.Fatalf("after the upgrade the schema is at %d (%v), want %d", version, err, len(saved)+1)
	}
	if err := s.db.QueryRow(`SELECT label FROM runs WHERE id = 'r'`).Scan(&label); err != nil || label != "none" {
		t.Fatalf("the new migration did not run: %q, %v", label, err)
	}
	recs, err := s.Load(ctx, "r", 0)
	if err != nil || len(recs) != 2 || string(recs[1].Data) != `"kept"` {
		t.Fatalf("records after the upgrade: %v, %v", recs, err)
	}
	// A failing migration leaves the database as it was.
	s.Close()
	migrations = append(slicesClone(migrations), `ALTER TABLE runs ADD COLUMN label TEXT`) // duplicate column
	if _, err := Open(path, nil); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("schema version %d", len(saved)+2)) {
		t.Fatalf("a failing migration: %v, want an error naming the migration", err)
	}
	migrations = migrations[:len(migrations)-1]
	s = mustOpen(t, path)
	if err := s.db.QueryRow(`SELECT max(version) FROM schema_migrations`).Scan(&version); err != nil || version != len(saved)+1 {
		t.Fatalf("after a failed migration the schema is at %d (%v), want %d", version, err, len(saved)+1)
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func TestForeignDatabaseIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE users (name TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(path, nil)
	if !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of another program's database: %v, want ErrForeign naming the path", err)
	}
}

// Records and conversation messages written by a newer loom are refused on
// read with an error naming the record, not misread.
func TestNewerRecordsAreRefused(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "loom.db"))
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{}), note(`1`), note(`2`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		update, want string
	}{
		{`UPDATE records SET version = 2 WHERE seq = 2`, "format version 2"},
		{`UPDATE records SET version = 1, kind = 'tool_progress' WHERE seq = 2`, `kind "tool_progress"`},
	} {
		if _, err := s.db.Exec(c.update); err != nil {
			t.Fatal(err)
		}
		_, err := s.Load(ctx, "r", 0)
		var ve *store.VersionError
		if !errors.As(err, &ve) || ve.Seq != 2 || ve.RunID != "r" {
			t.Fatalf("after %s: Load error %v, want a *VersionError for record 2", c.update, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %q does not say %q", err, c.want)
		}
		if recs, err := s.Load(ctx, "r", 2); err != nil || len(recs) != 1 {
			t.Errorf("records after the unknown one: %v, %v", recs, err)
		}
	}

	if err := s.AppendConversation(ctx, "c", "r", nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`INSERT INTO conversation_messages VALUES ('c', 1, 'r', CAST('{"role":"user","parts":[{"type":"hologram"}]}' AS BLOB))`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.History(ctx, "c"); !errors.Is(err, store.ErrVersion) || !strings.Contains(err.Error(), "hologram") {
		t.Fatalf("History with a message of an unknown part type: %v, want ErrVersion naming it", err)
	}
}

// A damaged journal (a record deleted behind the store's back) is reported,
// not returned with a hole in it.
func TestDamagedJournalIsReported(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "loom.db"))
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{}), note(`1`), note(`2`), note(`3`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`DELETE FROM records WHERE seq = 3`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, "r", 0); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Load of a journal with a gap: %v", err)
	}
	if _, err := s.db.Exec(`DELETE FROM records WHERE seq = 4`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, "r", 0); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Load of a journal missing its tail: %v", err)
	}
}

// openWith opens path with extra DSN parameters.
func openWith(t *testing.T, path string, extra url.Values) *Store {
	t.Helper()
	s, err := open(path, nil, extra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
