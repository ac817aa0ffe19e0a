package store

import (
	"errors"
	"fmt"
	"time"
)

// Sentinels for errors.Is. Each typed error below matches one of them.
var (
	// ErrNotFound: no run with that id.
	ErrNotFound = errors.New("store: run not found")
	// ErrConflict: the journal is not where the writer thought it was
	// (*ConflictError), or a conversation already holds different messages
	// for a run.
	ErrConflict = errors.New("store: conflicting write")
	// ErrClaimed: another owner holds a live claim on the run (*ClaimedError).
	ErrClaimed = errors.New("store: run claimed by another owner")
	// ErrVersion: a record or database of a format this build does not know
	// (*VersionError, or a backend's schema error).
	ErrVersion = errors.New("store: unsupported format version")
	// ErrInvalid: a bad argument (empty id, unknown kind, data that is not
	// JSON, ...). Nothing was written.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
)

// ConflictError is returned by Append when the journal's last sequence is not
// the one the caller expected: another writer appended first, or the caller
// is working from a stale copy. Nothing was written. Reload the journal
// (Load, or Get for LastSeq) before deciding what to do.
type ConflictError struct {
	RunID    string
	Expected int64 // the caller's expectedSeq
	Actual   int64 // the journal's last sequence (0: the run does not exist)
}

// Error says which run, where the caller thought the journal ended, and where it does.
func (e *ConflictError) Error() string {
	if e.Expected == 0 {
		return fmt.Sprintf("store: run %q already exists with %d records: a new run needs a new id", e.RunID, e.Actual)
	}
	return fmt.Sprintf("store: append to run %q after record %d, but its journal ends at record %d: another writer got there first; reload the run before appending", e.RunID, e.Expected, e.Actual)
}

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// ClaimedError is returned by Claim and Release when another owner holds a
// live claim on the run.
type ClaimedError struct {
	RunID   string
	Owner   string    // the holder of the claim
	Expires time.Time // when the holder's claim lapses unless renewed
}

// Error names the run, the holder and when its claim lapses.
func (e *ClaimedError) Error() string {
	return fmt.Sprintf("store: run %q is claimed by %q until %s: another process is working on it; wait for it to finish or for the claim to expire",
		e.RunID, e.Owner, e.Expires.UTC().Format(time.RFC3339))
}

// Is reports whether target is ErrClaimed.
func (e *ClaimedError) Is(target error) bool { return target == ErrClaimed }

// VersionError reports a record of a format this build cannot read or write.
type VersionError struct {
	RunID       string
	Seq         int64
	Kind        Kind
	Version     int  // the record's version
	UnknownKind bool // the version is fine but the kind is not one this build knows
}

// Error names the record and both versions, and says to upgrade.
func (e *VersionError) Error() string {
	where := fmt.Sprintf("record %d", e.Seq)
	if e.RunID != "" {
		where = fmt.Sprintf("run %q record %d", e.RunID, e.Seq)
	}
	if e.UnknownKind {
		return fmt.Sprintf("store: %s has kind %q, which this build of loom does not know: it was written by a newer loom; upgrade to read it",
			where, e.Kind)
	}
	return fmt.Sprintf("store: %s (%s) has format version %d, but this build of loom reads and writes version %d only: upgrade loom to read records of other versions",
		where, e.Kind, e.Version, Version)
}

// Is reports whether target is ErrVersion.
func (e *VersionError) Is(target error) bool { return target == ErrVersion }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// NotFound returns the error for a missing run: it matches ErrNotFound and
// names the run. Backends use it so every store says the same thing.
func NotFound(runID string) error {
	return fmt.Errorf("%w: %q (check the id; list runs to see which exist)", ErrNotFound, runID)
}
