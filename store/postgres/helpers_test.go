package postgres

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomkit/loom/store"
)

// The tests run against the PostgreSQL server whose URL is in
// LOOM_POSTGRES_URL; scripts/test starts a throwaway cluster and sets it.
// Without it they skip, unless CI=true, where they fail. Each test keeps its
// tables in a schema of its own, dropped when it ends.

const urlHelp = "LOOM_POSTGRES_URL is not set: run scripts/test, which starts a throwaway PostgreSQL cluster and sets it, or start one yourself: " +
	"scripts/install-postgres && export LOOM_POSTGRES_URL=$(scripts/install-postgres start .cache/postgres)"

var ctx = context.Background()

// serverURL returns the test server's URL, skipping (or, under CI, failing)
// the test without one.
func serverURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("LOOM_POSTGRES_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(urlHelp)
		}
		t.Skip(urlHelp)
	}
	return u
}

// newSchema returns the name of a schema no other test uses, and drops it
// (with everything in it) when t ends.
func newSchema(t testing.TB) string {
	t.Helper()
	u := serverURL(t)
	name := "t_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() {
		// A connection of its own: the cleanup may run in a synctest
		// bubble, and must not share a pool with code outside it.
		c, err := pgx.Connect(context.Background(), u)
		if err != nil {
			t.Errorf("dropping schema %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("dropping schema %s: %v", name, err)
		}
	})
	return name
}

// openSchema opens the store in schema, closed when t ends.
func openSchema(t testing.TB, schema string, opts *Options) *Store {
	t.Helper()
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Schema = schema
	s, err := Open(ctx, serverURL(t), &o)
	if err != nil {
		t.Fatalf("Open(schema %s): %v", schema, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openTest opens a store in a new schema.
func openTest(t testing.TB, opts *Options) *Store {
	t.Helper()
	return openSchema(t, newSchema(t), opts)
}

// admin returns a connection to the test server for looking behind the
// store's back, closed when t ends.
func admin(t testing.TB) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, serverURL(t))
	if err != nil {
		t.Fatalf("connecting to the test server: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// run runs sql on c in schema, failing t on error.
func run(t testing.TB, c *pgx.Conn, schema, sql string, args ...any) {
	t.Helper()
	if _, err := c.Exec(ctx, strings.ReplaceAll(sql, "{s}", pgx.Identifier{schema}.Sanitize()), args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func created(t testing.TB, h store.RunHeader) store.Record {
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

// within fails t unless done closes within d: what must not hang.
func within(t *testing.T, d time.Duration, what string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}
