// Package sqlite is the durable store.Store: one SQLite database file, pure
// Go (modernc.org/sqlite, no cgo), shared safely by any number of goroutines
// and processes.
//
// Each Append is one transaction that inserts the new records and updates
// one summary row, so its cost does not grow with the journal; nothing is
// ever rewritten. The database runs in WAL mode with synchronous=FULL, so a
// record Append reported saved survives a crash of the process or of the
// machine, and a process killed in the middle of a commit leaves the
// database with that commit either whole or absent. Writers from several
// processes queue on SQLite's lock (waiting up to Options.BusyTimeout) and
// then meet the store's sequence check, so exactly one of two racing
// appenders wins.
//
// The schema is versioned: Open applies the migrations this build knows
// and refuses a database written by a newer one (*SchemaError), or one that
// belongs to another program (ErrForeign).
//
// One caveat is SQLite's own: closing any file descriptor of the database
// file drops every POSIX lock the process holds on it, so while a Store is
// open, the process must not open and close the database file by other
// means (to copy or hash it, say); use another process or close the Store.
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
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/loomkit/loom/store"
)

// Options configure Open. The zero value, and nil, are the defaults.
type Options struct {
	// BusyTimeout is how long a write waits for another process to release
	// the database before failing. Zero means 10 seconds.
	BusyTimeout time.Duration
}

// Store is a store.Store backed by a SQLite database file. It is safe for
// concurrent use by goroutines and processes.
type Store struct {
	db     *sql.DB
	path   string
	closed atomic.Bool
	// writing queues this process's writers in Go (a one-slot semaphore a
	// waiter can abandon when its context ends) rather than in SQLite's
	// busy handler, which sleeps and retries; other processes still meet
	// SQLite's lock.
	writing chan struct{}
}

var _ store.Store = (*Store)(nil)

// DefaultPath returns where loom keeps its database: $XDG_STATE_HOME/loom/loom.db,
// falling back to ~/.local/state/loom/loom.db (and on Windows to
// %LocalAppData%\loom\loom.db).
func DefaultPath() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "loom", "loom.db"), nil
	}
	if runtime.GOOS == "windows" {
		d, err := os.UserCacheDir() // %LocalAppData%
		if err != nil {
			return "", fmt.Errorf("store/sqlite: no state directory: %w", err)
		}
		return filepath.Join(d, "loom", "loom.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("store/sqlite: no state directory: set XDG_STATE_HOME or HOME: %w", err)
	}
	return filepath.Join(home, ".local", "state", "loom", "loom.db"), nil
}

// Open opens the loom database at path, creating it and its parent
// directories (mode 0700, file mode 0600) if needed, and migrating its
// schema to the newest this build knows. opts may be nil.
func Open(path string, opts *Options) (*Store, error) {
	return open(path, opts, nil)
}

// open is Open with extra DSN parameters, which tests use to simulate
// failures (a read-only connection, a tiny max_page_count).
func open(path string, opts *Options, extra url.Values) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: store/sqlite: empty database path (use DefaultPath)", store.ErrInvalid)
	}
	if opts == nil {
		opts = &Options{}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store/sqlite: open %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("store/sqlite: open %s: create its directory: %w", abs, err)
	}
	// Create the file ourselves so it is private. O_EXCL: never open (and
	// then close) a file SQLite may already hold, since closing any
	// descriptor of a file drops the process's POSIX locks on it.
	if f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("store/sqlite: open %s: %w", abs, err)
	}

	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busy.Milliseconds(), 10)+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate") // take the write lock at BEGIN: no deadlocked upgrades
	for k, vs := range extra {
		for _, v := range vs {
			q.Add(k, v)
		}
	}
	uriPath := filepath.ToSlash(abs)
	if !strings.HasPrefix(uriPath, "/") {
		uriPath = "/" + uriPath // file:///C:/... on Windows
	}
	dsn := (&url.URL{Scheme: "file", Path: uriPath, RawQuery: q.Encode()}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store/sqlite: open %s: %w", abs, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	s := &Store{db: db, path: abs, writing: make(chan struct{}, 1)}
	if err := migrate(context.Background(), db, abs); err != nil {
		db.Close()
		var se *SchemaError
		if errors.As(err, &se) || errors.Is(err, ErrForeign) {
			return nil, err
		}
		return nil, fmt.Errorf("store/sqlite: open %s: %w", abs, explain(err))
	}
	return s, nil
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database. Calls after Close fail with store.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.db.Close()
}

// enter refuses calls on a closed store or with a done context.
func (s *Store) enter(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// fail wraps a backend error from operation op, saying ErrClosed if the
// store was closed under the call.
func (s *Store) fail(op string, err error) error {
	switch {
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrClaimed), errors.Is(err, store.ErrNotFound),
		errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrVersion):
		return err // already says what happened
	case s.closed.Load():
		return fmt.Errorf("store/sqlite: %s: %w", op, store.ErrClosed)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("store/sqlite: %s: %w", op, err)
	}
	return fmt.Errorf("store/sqlite: %s: %w", op, explain(err))
}

// explain adds what to do to the SQLite errors a user can act on.
func explain(err error) error {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	var hint string
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		hint = "the disk or the database is full: free some space"
	case sqlite3.SQLITE_READONLY:
		hint = "the database cannot be written: check the permissions of the file, its directory and the file system"
	case sqlite3.SQLITE_BUSY:
		hint = "another process held the database locked for longer than the busy timeout"
	case sqlite3.SQLITE_IOERR:
		hint = "the file system refused a read or write: a full disk, a file size limit or a failing device"
	case sqlite3.SQLITE_CANTOPEN:
		hint = "the database file cannot be opened: check the path and its permissions"
	case sqlite3.SQLITE_NOTADB:
		hint = "the file is not a SQLite database: give loom a path of its own"
	case sqlite3.SQLITE_CORRUPT:
		hint = "the database file is damaged"
	default:
		return err
	}
	return fmt.Errorf("%w (%s)", err, hint)
}

// write runs fn in one write transaction and commits it.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	select {
	case s.writing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.writing }()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return &commitError{err}
	}
	return nil
}

// commitError marks a failed COMMIT, after which the transaction's outcome
// is not known for certain (the disk may have taken it before the error).
type commitError struct{ err error }

func (e *commitError) Error() string { return e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// unsaved says what a failed write left behind.
func unsaved(err error) string {
	var ce *commitError
	if errors.As(err, &ce) {
		return "the commit failed, so this write may or may not have been saved: reload before going on"
	}
	return "nothing of this write was saved"
}
