package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/loomkit/loom/store"
)

// applicationID marks a loom database in its header ("loom" in ASCII), so a
// loom database is told apart from any other SQLite file.
const applicationID = 0x6c6f6f6d

// migrations[i] brings the schema from version i to version i+1. Released
// migrations are never edited: a change is a new migration at the end.
var migrations = []string{
	// 1: journals, run summaries, claims, conversations.
	`
CREATE TABLE runs (
	id              TEXT PRIMARY KEY,
	status          TEXT NOT NULL,
	created         INTEGER NOT NULL, -- Unix nanoseconds
	updated         INTEGER NOT NULL,
	last_seq        INTEGER NOT NULL,
	turns           INTEGER NOT NULL,
	model           TEXT NOT NULL,
	prompt          TEXT NOT NULL,
	conversation_id TEXT NOT NULL,
	error           TEXT NOT NULL
) STRICT;
CREATE INDEX runs_by_created ON runs (created DESC, id DESC);
CREATE INDEX runs_by_conversation ON runs (conversation_id, created DESC, id DESC);

CREATE TABLE records (
	run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	seq     INTEGER NOT NULL,
	kind    TEXT NOT NULL,
	version INTEGER NOT NULL,
	time    INTEGER NOT NULL, -- Unix nanoseconds
	data    BLOB,
	PRIMARY KEY (run_id, seq)
) STRICT;

CREATE TABLE claims (
	run_id  TEXT PRIMARY KEY,
	owner   TEXT NOT NULL,
	expires INTEGER NOT NULL -- Unix nanoseconds
) STRICT;

CREATE TABLE conversation_messages (
	conversation_id TEXT NOT NULL,
	pos             INTEGER NOT NULL,
	run_id          TEXT NOT NULL,
	message         BLOB NOT NULL,
	PRIMARY KEY (conversation_id, pos)
) STRICT;
CREATE INDEX conversation_messages_by_run ON conversation_messages (conversation_id, run_id, pos);
`,
	// 2: the application's data about a run (store.RunHeader.Meta).
	`ALTER TABLE runs ADD COLUMN meta BLOB;`,
}

// SchemaVersion is the newest database schema this build knows.
func SchemaVersion() int { return len(migrations) }

// SchemaError reports a database whose schema is newer than this build
// knows. It matches store.ErrVersion.
type SchemaError struct {
	Path      string
	Found     int // the database's schema version
	Supported int // the newest version this build knows
}

// Error names the file and both schema versions, and says what to do.
func (e *SchemaError) Error() string {
	return fmt.Sprintf("store/sqlite: %s has schema version %d, but this build of loom knows versions up to %d: it was written by a newer loom; upgrade loom, or point this one at another database file",
		e.Path, e.Found, e.Supported)
}

// Is reports whether target is store.ErrVersion.
func (e *SchemaError) Is(target error) bool { return target == store.ErrVersion }

// ErrForeign is returned by Open for a SQLite database that is not a loom
// database: loom does not write into other programs' files.
var ErrForeign = errors.New("store/sqlite: not a loom database")

// migrate brings the database at path up to the newest schema, in one
// transaction, refusing foreign and newer databases.
func migrate(ctx context.Context, db *sql.DB, path string) error {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: one migrator at a time
	if err != nil {
		return err
	}
	defer tx.Rollback()

	var appID int64
	if err := tx.QueryRowContext(ctx, `PRAGMA application_id`).Scan(&appID); err != nil {
		return err
	}
	var hasMigrations, tables int
	if err := tx.QueryRowContext(ctx,
		`SELECT count(*) FILTER (WHERE name = 'schema_migrations'), count(*) FROM sqlite_schema WHERE type = 'table'`,
	).Scan(&hasMigrations, &tables); err != nil {
		return err
	}
	if (appID != 0 && appID != applicationID) || (hasMigrations == 0 && tables > 0) {
		return fmt.Errorf("%w: %s is a SQLite database of another program (application id %#x, %d tables); give loom a path of its own",
			ErrForeign, path, appID, tables)
	}
	if hasMigrations == 0 {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied INTEGER NOT NULL) STRICT`); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA application_id = %d`, applicationID)); err != nil {
			return err
		}
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return err
	}
	if current > len(migrations) {
		return &SchemaError{Path: path, Found: current, Supported: len(migrations)}
	}
	if current == len(migrations) {
		return nil // nothing to write; the deferred rollback ends the transaction
	}
	for v := current; v < len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrate to schema version %d: %w", v+1, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied) VALUES (?, ?)`, v+1, time.Now().UnixNano()); err != nil {
			return err
		}
	}
	return tx.Commit()
}
