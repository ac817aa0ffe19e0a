package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomkit/loom/store"
)

// migrations[i] brings the schema from version i to version i+1. "{s}"
// stands for the quoted schema name. Released migrations are never edited
// (TestReleasedMigrations holds them): a change is a new migration at the
// end.
//
// Strings a caller chooses are bytea, compared and sorted byte by byte
// whatever the database's collation, and free to hold any bytes (a text
// column refuses NUL and invalid UTF-8). Times of records and runs are Unix
// nanoseconds, as the client stamped them; claim expiries are the server's
// timestamptz.
var migrations = []string{
	// 1: journals, run summaries, claims, conversations, blobs.
	`
CREATE TABLE {s}.runs (
	id              bytea PRIMARY KEY,
	status          text NOT NULL,
	created         bigint NOT NULL,
	updated         bigint NOT NULL,
	last_seq        bigint NOT NULL,
	turns           bigint NOT NULL,
	model           bytea NOT NULL,
	prompt          bytea NOT NULL,
	conversation_id bytea NOT NULL,
	error           bytea NOT NULL,
	meta            bytea
);
CREATE INDEX runs_by_created ON {s}.runs (created DESC, id DESC);
CREATE INDEX runs_by_conversation ON {s}.runs (conversation_id, created DESC, id DESC);

CREATE TABLE {s}.records (
	run_id  bytea NOT NULL REFERENCES {s}.runs (id) ON DELETE CASCADE,
	seq     bigint NOT NULL,
	kind    text NOT NULL,
	version integer NOT NULL,
	time    bigint NOT NULL,
	data    bytea,
	PRIMARY KEY (run_id, seq)
);

CREATE TABLE {s}.claims (
	run_id  bytea PRIMARY KEY,
	owner   bytea NOT NULL,
	expires timestamptz NOT NULL
);

CREATE TABLE {s}.conversations (
	id       bytea PRIMARY KEY,
	messages bigint NOT NULL
);
CREATE TABLE {s}.conversation_messages (
	conversation_id bytea NOT NULL,
	pos             bigint NOT NULL,
	run_id          bytea NOT NULL,
	message         bytea NOT NULL,
	PRIMARY KEY (conversation_id, pos)
);
CREATE INDEX conversation_messages_by_run ON {s}.conversation_messages (conversation_id, run_id, pos);

CREATE TABLE {s}.blobs (
	key     text PRIMARY KEY,
	data    bytea NOT NULL,
	created timestamptz NOT NULL DEFAULT now()
);
`,
}

// SchemaVersion is the newest schema version this build knows.
func SchemaVersion() int { return len(migrations) }

// versionTable records the migrations applied to a schema. Its name says
// whose it is: other programs' schema_migrations tables are not loom's.
const versionTable = "loom_schema"

// SchemaError reports a schema written by a newer loom than this build. It
// matches store.ErrVersion.
type SchemaError struct {
	Where     string // the database and schema
	Found     int    // the schema's version
	Supported int    // the newest version this build knows
}

// Error names the schema and both versions, and says what to do.
func (e *SchemaError) Error() string {
	return fmt.Sprintf("store/postgres: %s has schema version %d, but this build of loom knows versions up to %d: it was written by a newer loom; upgrade loom, or give this one another schema (Options.Schema) or database",
		e.Where, e.Found, e.Supported)
}

// Is reports whether target is store.ErrVersion.
func (e *SchemaError) Is(target error) bool { return target == store.ErrVersion }

// ErrForeign is matched by the error of Open for a schema that holds tables
// but is not a loom store's: loom does not write into other programs'
// tables.
var ErrForeign = errors.New("store/postgres: not a loom schema")

// lockKey is the first half of the advisory lock key migrations take
// ("loom" in ASCII); the second is a hash of the schema name.
const lockKey = 0x6c6f6f6d

// migrate brings the schema up to the newest version in one transaction,
// holding an advisory lock so that processes opening a new database at once
// migrate it one after the other.
func (s *Store) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockKey, s.schema); err != nil {
			return err
		}
		var exists bool
		var tables []string
		var versioned bool
		err := tx.QueryRow(ctx, `
			SELECT n.oid IS NOT NULL,
				coalesce(array_agg(c.relname ORDER BY c.relname) FILTER (WHERE c.relname IS NOT NULL), '{}'),
				coalesce(bool_or(c.relname = $2 AND c.relkind = 'r'), false)
			FROM (SELECT $1::name AS nspname) want
			LEFT JOIN pg_namespace n ON n.nspname = want.nspname
			LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
			GROUP BY n.oid`, s.schema, versionTable).Scan(&exists, &tables, &versioned)
		if err != nil {
			return err
		}
		qs := pgx.Identifier{s.schema}.Sanitize()
		switch {
		case !exists:
			if _, err := tx.Exec(ctx, `CREATE SCHEMA `+qs); err != nil {
				return fmt.Errorf("create schema %s: %w", qs, err)
			}
		case !versioned && len(tables) > 0:
			return fmt.Errorf("%w: %s holds tables (%s) but no %s table: it belongs to another program; give loom a schema of its own (Options.Schema)",
				ErrForeign, s.where, strings.Join(tables, ", "), versionTable)
		}
		if !versioned {
			if _, err := tx.Exec(ctx, `CREATE TABLE `+qs+`.`+versionTable+` (version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())`); err != nil {
				return fmt.Errorf("create %s.%s: %w", qs, versionTable, err)
			}
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+qs+`.`+versionTable).Scan(&current); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && !unavailable(err) {
				return fmt.Errorf("%w: %s: its %s table is not loom's (%v)", ErrForeign, s.where, versionTable, err)
			}
			return err
		}
		if current > len(migrations) {
			return &SchemaError{Where: s.where, Found: current, Supported: len(migrations)}
		}
		for v := current; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, strings.ReplaceAll(migrations[v], "{s}", qs)); err != nil {
				return fmt.Errorf("migrate %s to schema version %d: %w", s.where, v+1, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+qs+`.`+versionTable+` (version) VALUES ($1)`, v+1); err != nil {
				return err
			}
		}
		return nil
	})
}
