package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomkit/loom/store"
)

// Released migrations are never edited: a database migrated by an older
// build would then differ from a new one, silently. A change to the schema
// is a new migration at the end; this test pins the released ones.
func TestReleasedMigrations(t *testing.T) {
	released := []string{
		"dbb611fad49277bfa64944fe7395a278a5cab496c3bf735b551f64e51138dccb", // 1
	}
	if len(migrations) < len(released) {
		t.Fatalf("%d migrations, but %d were released: released migrations are never removed", len(migrations), len(released))
	}
	for i, want := range released {
		sum := sha256.Sum256([]byte(migrations[i]))
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("migration %d was edited (sha256 %s, released as %s): undo the edit and add a new migration instead", i+1, got, want)
		}
	}
}

func schemaVersion(t *testing.T, db *pgx.Conn, schema string) (versions []int) {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT version FROM `+pgx.Identifier{schema}.Sanitize()+`.`+versionTable+` ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	versions, err = pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return versions
}

// Open makes the schema and records its version; opening again changes
// nothing and keeps everything.
func TestOpenCreatesAndKeeps(t *testing.T) {
	schema := newSchema(t)
	s := openSchema(t, schema, nil)
	db := admin(t)
	if v := schemaVersion(t, db, schema); len(v) != SchemaVersion() || v[len(v)-1] != SchemaVersion() {
		t.Fatalf("a new schema records versions %v, want 1 to %d", v, SchemaVersion())
	}
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{Model: "m"}), note(`1`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Blobs().Put(ctx, blobKey([]byte("b")), []byte("b")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	again := openSchema(t, schema, nil)
	if v := schemaVersion(t, db, schema); len(v) != SchemaVersion() {
		t.Fatalf("reopening recorded versions %v", v)
	}
	if recs, err := again.Load(ctx, "r", 0); err != nil || len(recs) != 2 {
		t.Fatalf("after reopening: %d records, %v", len(recs), err)
	}
	if b, err := again.Blobs().Get(ctx, blobKey([]byte("b"))); err != nil || string(b) != "b" {
		t.Fatalf("after reopening: blob %q, %v", b, err)
	}
}

// Processes opening a new database at once migrate it one after the other:
// all of them succeed, and the migrations are applied once.
func TestConcurrentOpens(t *testing.T) {
	schema := newSchema(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(ctx, serverURL(t), &Options{Schema: schema})
			if err == nil {
				_, err = s.Append(ctx, "r"+string(rune('a'+i)), 0, created(t, store.RunHeader{}))
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("opener %d: %v", i, err)
		}
	}
	if v := schemaVersion(t, admin(t), schema); len(v) != SchemaVersion() {
		t.Fatalf("after concurrent opens the schema records versions %v", v)
	}
}

// A schema of a newer loom is refused with the versions named, and left
// as it is.
func TestNewerSchemaIsRefused(t *testing.T) {
	schema := newSchema(t)
	openSchema(t, schema, nil).Close()
	db := admin(t)
	run(t, db, schema, `INSERT INTO {s}.`+versionTable+` (version) VALUES ($1)`, SchemaVersion()+1)
	_, err := Open(ctx, serverURL(t), &Options{Schema: schema})
	var se *SchemaError
	if !errors.As(err, &se) || !errors.Is(err, store.ErrVersion) || se.Found != SchemaVersion()+1 || se.Supported != SchemaVersion() {
		t.Fatalf("Open of a newer schema: %v, want a *SchemaError matching store.ErrVersion", err)
	}
	if msg := err.Error(); !strings.Contains(msg, schema) || !strings.Contains(msg, "upgrade loom") {
		t.Errorf("error %q does not name the schema and say what to do", msg)
	}
	if v := schemaVersion(t, db, schema); len(v) != SchemaVersion()+1 {
		t.Fatalf("the refused schema was changed: versions %v", v)
	}
}

// A schema holding another program's tables is refused and left alone;
// an empty one (made for loom by an administrator) is taken.
func TestForeignSchemaIsRefused(t *testing.T) {
	db := admin(t)
	for _, c := range []struct{ name, setup string }{
		{"someone's tables", `CREATE TABLE {s}.users (id int)`},
		{"another migration tool's", `CREATE TABLE {s}.schema_migrations (version bigint, dirty boolean)`},
		{"a view", `CREATE VIEW {s}.runs AS SELECT 1 AS id`},
		{"a table named like loom's that is not", `CREATE TABLE {s}.` + versionTable + ` (name text)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			schema := newSchema(t)
			run(t, db, schema, `CREATE SCHEMA {s}`)
			run(t, db, schema, c.setup)
			_, err := Open(ctx, serverURL(t), &Options{Schema: schema})
			if !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), schema) {
				t.Fatalf("Open: %v, want ErrForeign naming the schema", err)
			}
			var n int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1`, schema).Scan(&n); err != nil || n != 1 {
				t.Fatalf("the refused schema holds %d relations (%v), want its one", n, err)
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		schema := newSchema(t)
		run(t, db, schema, `CREATE SCHEMA {s}`)
		s := openSchema(t, schema, nil)
		if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{})); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOpenBadArguments(t *testing.T) {
	u := serverURL(t)
	for _, c := range []struct {
		name, url string
		opts      *Options
	}{
		{"schema with a quote", u, &Options{Schema: `x"; DROP TABLE y; --`}},
		{"schema in capitals", u, &Options{Schema: "Loom"}},
		{"schema too long", u, &Options{Schema: strings.Repeat("s", 64)}},
		{"not a URL", "postgres://[::1", nil},
		{"unknown parameter value", "postgres://127.0.0.1/x?sslmode=sometimes", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(ctx, c.url, c.opts)
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("Open: %v, want ErrInvalid", err)
			}
		})
	}
	t.Run("password not repeated", func(t *testing.T) {
		_, err := Open(ctx, "postgres://u:s3cret-pw@127.0.0.1:1/x?sslmode=sometimes", nil)
		if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
			t.Fatalf("Open: %v, want an error that does not repeat the password", err)
		}
	})
}

// A server that cannot be reached fails Open promptly with ErrUnavailable,
// and never with the password in the message.
func TestUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = Open(ctx, "postgres://u:s3cret-pw@"+addr+"/x?sslmode=disable", &Options{Timeout: 10 * time.Second})
	if !errors.Is(err, ErrUnavailable) || strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("Open of a closed port: %v, want ErrUnavailable without the password", err)
	}
}
