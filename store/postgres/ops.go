package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/store"
)

// summaryArgs are a summary's columns after id, in summaryColumns' order,
// as statement arguments. Strings go as []byte: a Go string given for a
// bytea column would be read as bytea's text form.
func summaryArgs(info store.RunInfo) []any {
	return []any{string(info.Status), info.Created.UnixNano(), info.Updated.UnixNano(), info.LastSeq, int64(info.Turns),
		[]byte(info.Model), []byte(info.Prompt), []byte(info.ConversationID), []byte(info.Error)}
}

// recordArgs are recs as the five arrays recordsFrom reads.
func recordArgs(recs []store.Record) []any {
	seqs := make([]int64, len(recs))
	kinds := make([]string, len(recs))
	versions := make([]int32, len(recs))
	times := make([]int64, len(recs))
	data := make([][]byte, len(recs))
	for i, r := range recs {
		seqs[i], kinds[i], versions[i], times[i], data[i] = r.Seq, string(r.Kind), int32(r.Version), r.Time.UnixNano(), r.Data
	}
	return []any{seqs, kinds, versions, times, data}
}

// scanInfo reads summaryColumns, then meta if withMeta, then the owner if
// owner is non-nil.
func scanInfo(row pgx.Row, withMeta bool, owner *[]byte) (store.RunInfo, error) {
	var info store.RunInfo
	var id, model, prompt, conv, errText, meta []byte
	var status string
	var created, updated, turns int64
	dest := []any{&id, &status, &created, &updated, &info.LastSeq, &turns, &model, &prompt, &conv, &errText}
	if withMeta {
		dest = append(dest, &meta)
	}
	if owner != nil {
		dest = append(dest, owner)
	}
	if err := row.Scan(dest...); err != nil {
		return store.RunInfo{}, err
	}
	info.ID, info.Status = string(id), store.Status(status)
	info.Created, info.Updated = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	info.Turns = int(turns)
	info.Model, info.Prompt, info.ConversationID, info.Error = string(model), string(prompt), string(conv), string(errText)
	info.Meta = string(meta)
	return info, nil
}

// cached returns the summary this process last wrote for run id if its
// journal ended at seq then.
func (s *Store) cached(id string, seq int64) (store.RunInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, ok := s.runs[id]
	return info, ok && info.LastSeq == seq
}

func (s *Store) remember(info store.RunInfo) {
	info.Meta, info.Owner = "", "" // not part of the fold
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.runs[info.ID]; !ok && len(s.runs) >= maxCachedRuns {
		for k := range s.runs { // drop one at random
			delete(s.runs, k)
			break
		}
	}
	s.runs[info.ID] = info
}

func (s *Store) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runs, id)
}

// Append implements store.Store: one statement that checks the journal's
// end and inserts the records (see the package doc).
func (s *Store) Append(ctx context.Context, runID string, expectedSeq int64, recs ...store.Record) (int64, error) {
	total := 0
	for _, r := range recs {
		total += len(r.Data)
	}
	if total > MaxBatchBytes { // before PrepareAppend copies them
		return 0, fmt.Errorf("%w: append to run %q: %d records hold %d bytes of data, more than one append takes (%d): append them in smaller batches",
			store.ErrInvalid, runID, len(recs), total, MaxBatchBytes)
	}
	prepared, err := store.PrepareAppend(runID, expectedSeq, recs, time.Now())
	if err != nil {
		return 0, err
	}
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	last, err := s.append(ctx, runID, expectedSeq, prepared)
	if err != nil {
		s.forget(runID)
		return 0, s.fail(ctx, fmt.Sprintf("append to run %q (%s)", runID, unsaved(err)), err)
	}
	return last, nil
}

func (s *Store) append(ctx context.Context, runID string, expectedSeq int64, prepared []store.Record) (int64, error) {
	id := []byte(runID)
	n := int64(len(prepared))
	if expectedSeq == 0 {
		var info store.RunInfo
		for _, r := range prepared {
			if err := info.Apply(runID, r); err != nil {
				return 0, err
			}
		}
		var meta []byte // NULL for none
		if info.Meta != "" {
			meta = []byte(info.Meta)
		}
		args := append(append([]any{id}, summaryArgs(info)...), meta)
		tag, err := s.pool.Exec(ctx, s.q.createRun, append(args, recordArgs(prepared)...)...)
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() == n {
			s.remember(info)
			return info.LastSeq, nil
		}
		last, err := s.lastSeqOf(ctx, runID)
		if err != nil {
			return 0, err
		}
		return 0, &store.ConflictError{RunID: runID, Expected: 0, Actual: last}
	}

	prior, fresh := s.cached(runID, expectedSeq)
	for {
		if !fresh {
			var err error
			prior, err = scanInfo(s.pool.QueryRow(ctx, s.q.summary, id), false, nil)
			if errors.Is(err, pgx.ErrNoRows) {
				return 0, store.NotFound(runID)
			}
			if err != nil {
				return 0, err
			}
			if prior.LastSeq != expectedSeq {
				return 0, &store.ConflictError{RunID: runID, Expected: expectedSeq, Actual: prior.LastSeq}
			}
		}
		info := prior
		for _, r := range prepared {
			if err := info.Apply(runID, r); err != nil {
				return 0, err
			}
		}
		args := append([]any{id}, summaryArgs(info)...)
		args = append(args, recordArgs(prepared)...)
		args = append(args, summaryArgs(prior)...)
		tag, err := s.pool.Exec(ctx, s.q.appendRun, args...)
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() == n {
			s.remember(info)
			return info.LastSeq, nil
		}
		if fresh {
			// The summary this process remembered is not the row's: another
			// process appended since. Read the row and decide again.
			fresh = false
			continue
		}
		// The row changed between reading and writing it.
		last, err := s.lastSeqOf(ctx, runID)
		if err != nil {
			return 0, err
		}
		if last == expectedSeq {
			return 0, fmt.Errorf("the summary of run %q changed although its journal did not (was the database edited by hand?)", runID)
		}
		return 0, &store.ConflictError{RunID: runID, Expected: expectedSeq, Actual: last}
	}
}

// lastSeqOf returns the run's last sequence, 0 if it does not exist.
func (s *Store) lastSeqOf(ctx context.Context, runID string) (int64, error) {
	var last int64
	err := s.pool.QueryRow(ctx, s.q.lastSeq, []byte(runID)).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return last, err
}

// Load implements store.Store.
func (s *Store) Load(ctx context.Context, runID string, afterSeq int64) ([]store.Record, error) {
	if err := store.CheckRunID(runID); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	recs, err := s.load(ctx, runID, max(afterSeq, 0))
	if err != nil {
		return nil, s.fail(ctx, fmt.Sprintf("load run %q", runID), err)
	}
	return recs, nil
}

func (s *Store) load(ctx context.Context, runID string, afterSeq int64) ([]store.Record, error) {
	rows, err := s.pool.Query(ctx, s.q.load, []byte(runID), afterSeq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Record
	found := false
	var last int64
	next := afterSeq + 1
	for rows.Next() {
		var seq *int64
		var kind *string
		var version *int32
		var t *int64
		var data []byte
		if err := rows.Scan(&last, &seq, &kind, &version, &t, &data); err != nil {
			return nil, err
		}
		if !found {
			found = true
			out = make([]store.Record, 0, max(0, last-afterSeq))
		}
		if seq == nil {
			continue // the run has no records after afterSeq
		}
		r := store.Record{Seq: *seq, Kind: store.Kind(*kind), Version: int(*version), Time: time.Unix(0, *t).UTC()}
		if data != nil {
			r.Data = data // pgx gives each row's []byte its own memory
		}
		if r.Seq != next {
			return nil, fmt.Errorf("journal is damaged: record %d follows record %d", r.Seq, next-1)
		}
		if err := store.CheckStored(runID, r); err != nil {
			return nil, err
		}
		out = append(out, r)
		next++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, store.NotFound(runID)
	}
	if next-1 < last {
		return nil, fmt.Errorf("journal is damaged: it ends at record %d but its run says %d", next-1, last)
	}
	return out, nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, runID string) (store.RunInfo, error) {
	if err := store.CheckRunID(runID); err != nil {
		return store.RunInfo{}, err
	}
	if err := s.enter(ctx); err != nil {
		return store.RunInfo{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var owner []byte
	info, err := scanInfo(s.pool.QueryRow(ctx, s.q.get, []byte(runID), s.now()), true, &owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.RunInfo{}, store.NotFound(runID)
	}
	if err != nil {
		return store.RunInfo{}, s.fail(ctx, fmt.Sprintf("get run %q", runID), err)
	}
	info.Owner = string(owner)
	info.Status = store.Effective(info.Status, info.Owner != "")
	return info, nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, f store.Filter) ([]store.RunInfo, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("%w: list runs: negative limit %d", store.ErrInvalid, f.Limit)
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var conv, limit any // NULL: any conversation, no limit
	if f.ConversationID != "" {
		conv = []byte(f.ConversationID)
	}
	if f.Limit > 0 {
		limit = int64(f.Limit)
	}
	rows, err := s.pool.Query(ctx, s.q.list, s.now(), string(f.Status), conv, limit)
	if err != nil {
		return nil, s.fail(ctx, "list runs", err)
	}
	defer rows.Close()
	var out []store.RunInfo
	for rows.Next() {
		var owner []byte
		info, err := scanInfo(rows, true, &owner)
		if err != nil {
			return nil, s.fail(ctx, "list runs", err)
		}
		info.Owner = string(owner)
		info.Status = store.Effective(info.Status, info.Owner != "")
		out = append(out, info)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "list runs", err)
	}
	return out, nil
}

// maxClaimTries bounds how often Claim and Release go round when the claim
// changes hands between their two statements.
const maxClaimTries = 8

// Claim implements store.Store. The claim's expiry and whether a claim is
// live are the database server's clock (see the package doc).
func (s *Store) Claim(ctx context.Context, runID, owner string, ttl time.Duration) error {
	if err := store.CheckClaim(runID, owner, ttl); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	us := ttl / time.Microsecond // the server's clock counts microseconds: round up
	if ttl%time.Microsecond != 0 {
		us++
	}
	err := s.changeClaim(ctx, runID, owner, false, func(now any) (bool, error) {
		var expires time.Time
		err := s.pool.QueryRow(ctx, s.q.claim, []byte(runID), []byte(owner), int64(us), now).Scan(&expires)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("claim run %q", runID), err)
	}
	return nil
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, runID, owner string) error {
	if err := store.CheckRelease(runID, owner); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	err := s.changeClaim(ctx, runID, owner, true, func(now any) (bool, error) {
		tag, err := s.pool.Exec(ctx, s.q.release, []byte(runID), []byte(owner), now)
		return err == nil && tag.RowsAffected() == 1, err
	})
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("release run %q", runID), err)
	}
	return nil
}

// changeClaim runs change, which reports whether it took (or dropped) the
// claim. If it did not, a live claim of another owner is the reason
// (*store.ClaimedError); no claim at all means, for a release, that there
// is nothing to do; anything else means the claim changed hands in
// between, so change runs again.
func (s *Store) changeClaim(ctx context.Context, runID, owner string, release bool, change func(now any) (bool, error)) error {
	for range maxClaimTries {
		now := s.now()
		done, err := change(now)
		if err != nil || done {
			return err
		}
		var holder []byte
		var expires time.Time
		var live bool
		err = s.pool.QueryRow(ctx, s.q.holder, []byte(runID), now).Scan(&holder, &expires, &live)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if release {
				return nil
			}
		case err != nil:
			return err
		case live && string(holder) != owner:
			return &store.ClaimedError{RunID: runID, Owner: string(holder), Expires: expires.UTC()}
		}
	}
	return fmt.Errorf("the claim on run %q changed hands %d times while this process tried to change it", runID, maxClaimTries)
}

// History implements store.Store.
func (s *Store) History(ctx context.Context, convID string) ([]llm.Message, error) {
	if convID == "" {
		return nil, fmt.Errorf("%w: history: empty conversation id", store.ErrInvalid)
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, s.q.history, []byte(convID))
	if err != nil {
		return nil, s.fail(ctx, fmt.Sprintf("history of conversation %q", convID), err)
	}
	defer rows.Close()
	out := []llm.Message{}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, s.fail(ctx, fmt.Sprintf("history of conversation %q", convID), err)
		}
		m, err := store.DecodeMessage(convID, len(out), b)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, fmt.Sprintf("history of conversation %q", convID), err)
	}
	return out, nil
}

// AppendConversation implements store.Store: one transaction that holds
// the conversation's row locked, so that its appenders (in any process)
// take positions one after the other and a run's messages go in once.
func (s *Store) AppendConversation(ctx context.Context, convID, runID string, msgs []llm.Message) error {
	encoded, err := store.EncodeConversation(convID, runID, msgs)
	if err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	conv, run := []byte(convID), []byte(runID)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var n int64
		if err := tx.QueryRow(ctx, s.q.lockConv, conv).Scan(&n); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, s.q.runMessages, conv, run)
		if err != nil {
			return err
		}
		prior, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			return err
		}
		if len(prior) > 0 {
			if slices.EqualFunc(prior, encoded, bytes.Equal) {
				return nil
			}
			return store.ConversationConflict(convID, runID)
		}
		_, err = tx.Exec(ctx, s.q.addMessages, conv, run, n, encoded)
		return err
	})
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("append to conversation %q from run %q (%s)", convID, runID, unsaved(err)), err)
	}
	return nil
}
