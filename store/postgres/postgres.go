// Package postgres is the store.Store that many machines share: the runs,
// claims and conversations of a cluster in one PostgreSQL database, and,
// through Blobs, the content-addressed blobs the Temporal workers of a task
// queue share. It talks to the server through a pgx connection pool
// (github.com/jackc/pgx/v5/pgxpool).
//
// # What it promises
//
// Everything store.Store promises, across processes and machines:
//
//   - Append is one SQL statement, so one transaction: it inserts the new
//     records and moves the run's summary row on only if that row is still
//     the one the store folded the records into (its last sequence, status,
//     turns and the rest): a compare-and-set the database decides. Of two
//     writers racing on one run exactly one wins; the other gets a
//     *store.ConflictError, and nothing is lost or written twice (the
//     primary key (run, seq) forbids it besides). An append costs the same
//     however long the journal is: one row updated by key, the records
//     inserted, and, when this process wrote the run's last record, no read
//     at all.
//   - Claims are judged by the database server's clock, never by the
//     clients': a claim's expiry is the server's time when it was taken plus
//     its ttl, and "is it live" is asked of the server's clock too. Machines
//     whose clocks disagree still agree about who holds a run; only a step of
//     the server's own clock can end a claim early or late, and the sequence
//     check of Append keeps two writers apart even then. Record times are
//     the appending client's clock, as with every store.
//   - A record or conversation written by a newer loom is refused on read
//     (*store.VersionError, store.ErrVersion), never misread.
//
// # Bounds
//
// Record data is bounded by store.MaxDataSize, one Append's records by
// MaxBatchBytes and a blob by MaxBlobSize, each refused with
// store.ErrInvalid past its bound. Every call is bounded in time by its
// context and, when the context allows longer, by Options.Timeout; a server
// that stops answering ends the call with an error matching ErrUnavailable
// and context.DeadlineExceeded, never a hang. A connection that is refused
// or lost matches ErrUnavailable. A write whose connection was lost after
// it was sent may have been saved: the error says so, and, as with every
// store, a driver reloads the journal before going on.
//
// # The database
//
// The store keeps its tables in a schema of its own, "loom" unless
// Options.Schema says otherwise, creating it on first use (the user needs
// the CREATE privilege on the database, or a DBA creates the schema and
// gives it to the user). The schema is versioned: Open applies the
// migrations this build knows, one migrator at a time, and refuses a schema
// written by a newer loom (*SchemaError, store.ErrVersion) or one that is
// not loom's (ErrForeign). Strings (ids, owners, prompts) are stored as
// bytes, so any string a caller gives comes back exactly and sorts
// byte-wise, whatever the database's encoding and collation.
//
// # The pool
//
// A Store holds one pgxpool.Pool, safe for concurrent use by any number of
// goroutines; several processes each with a Store on one database is the
// intended use. The pool's size and lifetimes come from the URL's
// pool_max_conns, pool_max_conn_idle_time, ... parameters (see pgxpool's
// ParseConfig), its connection settings from the rest of the URL. Statements
// are prepared and cached per connection; behind a pooler in transaction
// mode add default_query_exec_mode=exec to the URL.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomkit/loom/store"
)

// DefaultSchema is the schema the store's tables live in unless
// Options.Schema names another.
const DefaultSchema = "loom"

// MaxBatchBytes bounds the data of the records of one Append (256 MiB):
// the records travel in one statement, and PostgreSQL refuses a value of
// 1 GiB or more.
const MaxBatchBytes = 256 << 20

// Options configure Open. The zero value, and nil, are the defaults.
type Options struct {
	// Schema is the PostgreSQL schema of the store's tables: lower-case
	// letters, digits and underscores, starting with a letter or an
	// underscore, at most 63 bytes. "" means DefaultSchema. Stores in
	// different schemas of one database are independent.
	Schema string

	// Timeout bounds each call to the store whose context allows it longer
	// (or has no deadline). Zero means 30 seconds.
	Timeout time.Duration

	// ClaimClock, if set, replaces the database server's clock for claims.
	// It is for tests on a fake clock (testing/synctest); every process
	// sharing the database must then use the same clock. Nil, the default,
	// is the server's clock.
	ClaimClock func() time.Time
}

// ErrUnavailable is matched by the error of a call the database did not
// answer: it could not be reached, the connection was lost, the server is
// shutting down, or it did not answer within Options.Timeout.
var ErrUnavailable = errors.New("store/postgres: database unavailable")

// Store is a store.Store on a PostgreSQL database. It is safe for
// concurrent use by goroutines and by processes sharing the database.
type Store struct {
	pool    *pgxpool.Pool
	where   string // the database and schema, for messages (no password)
	schema  string
	timeout time.Duration
	clock   func() time.Time
	q       queries
	closed  atomic.Bool
	blobs   *Blobs

	// runs caches the summary of runs this process appended to, keyed by
	// id. A summary at a given last sequence never changes (the journal up
	// to there is immutable), and Append's compare-and-set checks it against
	// the row anyway, so an entry is never wrong, only sometimes unused.
	mu   sync.Mutex
	runs map[string]store.RunInfo
}

// maxCachedRuns bounds Store.runs.
const maxCachedRuns = 4096

var _ store.Store = (*Store)(nil)

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Open connects to the database at url (postgres://user@host:port/db?...,
// or the key=value form libpq accepts), migrates the store's schema to the
// newest this build knows and returns the store. ctx bounds the connection
// and the migration. opts may be nil.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	schema := opts.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if !schemaName.MatchString(schema) {
		return nil, fmt.Errorf("%w: store/postgres: schema name %q: use lower-case letters, digits and underscores, starting with a letter or an underscore, at most 63 bytes", store.ErrInvalid, schema)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message repeats the URL with its password masked.
		return nil, fmt.Errorf("%w: store/postgres: %v", store.ErrInvalid, err)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	cc := cfg.ConnConfig
	where := fmt.Sprintf("database %q on %s:%d, schema %q", cc.Database, cc.Host, cc.Port, schema)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: %s: %w", where, err)
	}
	s := &Store{
		pool:    pool,
		where:   where,
		schema:  schema,
		timeout: timeout,
		clock:   opts.ClaimClock,
		q:       newQueries(schema),
		runs:    make(map[string]store.RunInfo),
	}
	s.blobs = &Blobs{s: s}
	mctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.migrate(mctx); err != nil {
		pool.Close()
		var se *SchemaError
		if errors.As(err, &se) || errors.Is(err, ErrForeign) {
			return nil, err
		}
		return nil, s.fail(mctx, "open", err)
	}
	return s, nil
}

// Close closes the pool, waiting for calls in progress to end. Calls after
// Close fail with store.ErrClosed; Close may be called more than once.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.pool.Close()
	return nil
}

// Blobs returns the blob store in the same database, schema and pool. It is
// closed with s.
func (s *Store) Blobs() *Blobs { return s.blobs }

// enter refuses calls on a closed store or with a done context.
func (s *Store) enter(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// errTimeout is the cause of the contexts bound gives its own deadline.
var errTimeout = errors.New("store/postgres: Options.Timeout elapsed")

// bound returns ctx limited to s.timeout, unless its own deadline is
// sooner.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.timeout {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, s.timeout, errTimeout)
}

// now is the claim clock as an SQL argument: nil (NULL, so the server's
// clock) unless Options.ClaimClock is set.
func (s *Store) now() any {
	if s.clock == nil {
		return nil
	}
	return s.clock()
}

// fail wraps the error err of operation op, run under ctx (as returned by
// bound), saying what happened in terms a caller can act on.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	switch {
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrClaimed), errors.Is(err, store.ErrNotFound),
		errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrVersion), errors.Is(err, ErrBlobNotFound):
		return err // already says what happened
	case s.closed.Load():
		return fmt.Errorf("store/postgres: %s: %w", op, store.ErrClosed)
	case errors.Is(context.Cause(ctx), errTimeout):
		return fmt.Errorf("%w: store/postgres: %s: the database (%s) did not answer within %v (Options.Timeout): %w",
			ErrUnavailable, op, s.where, s.timeout, context.DeadlineExceeded)
	case ctx.Err() != nil:
		return fmt.Errorf("store/postgres: %s: %w", op, ctx.Err())
	case unavailable(err):
		return fmt.Errorf("%w: store/postgres: %s: %s: %w", ErrUnavailable, op, s.where, err)
	}
	return fmt.Errorf("store/postgres: %s: %w", op, explain(err))
}

// unavailable reports whether err says the server could not be reached or
// the connection is gone, as opposed to the server refusing a statement.
func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin or crash shutdown, cannot connect now
			return true
		case pe.Code == "53300": // too many connections
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// explain adds what to do to the server's errors a user can act on.
func explain(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	var hint string
	switch {
	case pe.Code == "42501":
		hint = "the database user lacks a privilege the store needs: grant it CREATE on the database, or create the schema for it (CREATE SCHEMA name AUTHORIZATION user)"
	case pe.Code == "25006":
		hint = "the server accepts no writes (a standby, or default_transaction_read_only): point loom at the primary"
	case pe.Code == "53100":
		hint = "the server's disk is full"
	case pe.Code == "54000":
		hint = "a value is larger than the server accepts"
	case pe.Code == "57014":
		hint = "the server cancelled the statement (statement_timeout, or an operator)"
	case strings.HasPrefix(pe.Code, "3D"):
		hint = "the database does not exist: create it, or give the URL of one that does"
	case strings.HasPrefix(pe.Code, "28"):
		hint = "the server refused the user or the password"
	default:
		return err
	}
	return fmt.Errorf("%w (%s)", err, hint)
}

// unsaved says what a failed write left behind: nothing, when the server
// refused it or it never left; otherwise it may have been saved.
func unsaved(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && !unavailable(err) || pgconn.SafeToRetry(err) || errors.Is(err, store.ErrInvalid) {
		return "nothing of this write was saved"
	}
	return "the write may or may not have been saved: reload before going on"
}
