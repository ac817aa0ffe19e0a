package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/store"
)

// summaryColumns are the columns Append reads and writes; infoColumns add
// meta, which only the first record sets, so appends never copy it.
const (
	summaryColumns = `id, status, created, updated, last_seq, turns, model, prompt, conversation_id, error`
	infoColumns    = summaryColumns + `, meta`
)

type scanner interface{ Scan(dest ...any) error }

// scanInfo reads summaryColumns, then meta if withMeta, then the owner if
// owner is non-nil.
func scanInfo(row scanner, withMeta bool, owner *string) (store.RunInfo, error) {
	var info store.RunInfo
	var status string
	var created, updated int64
	dest := []any{&info.ID, &status, &created, &updated, &info.LastSeq, &info.Turns,
		&info.Model, &info.Prompt, &info.ConversationID, &info.Error}
	var meta []byte
	if withMeta {
		dest = append(dest, &meta)
	}
	if owner != nil {
		dest = append(dest, owner)
	}
	if err := row.Scan(dest...); err != nil {
		return store.RunInfo{}, err
	}
	info.Meta = string(meta)
	info.Status = store.Status(status)
	info.Created = time.Unix(0, created).UTC()
	info.Updated = time.Unix(0, updated).UTC()
	return info, nil
}

// Append implements store.Store: one transaction that checks the journal's
// last sequence, inserts the records and updates the run's summary row.
func (s *Store) Append(ctx context.Context, runID string, expectedSeq int64, recs ...store.Record) (int64, error) {
	prepared, err := store.PrepareAppend(runID, expectedSeq, recs, time.Now())
	if err != nil {
		return 0, err
	}
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	var info store.RunInfo
	err = s.write(ctx, func(tx *sql.Tx) error {
		var err error
		info, err = scanInfo(tx.QueryRowContext(ctx, `SELECT `+summaryColumns+` FROM runs WHERE id = ?`, runID), false, nil)
		exists := err == nil
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if expectedSeq > 0 {
				return store.NotFound(runID)
			}
		case err != nil:
			return err
		}
		if info.LastSeq != expectedSeq {
			return &store.ConflictError{RunID: runID, Expected: expectedSeq, Actual: info.LastSeq}
		}
		for _, r := range prepared {
			if err := info.Apply(runID, r); err != nil {
				return err
			}
		}
		// The summary row first: records reference it.
		args := []any{info.Status, info.Created.UnixNano(), info.Updated.UnixNano(), info.LastSeq, info.Turns,
			info.Model, info.Prompt, info.ConversationID, info.Error, runID}
		if exists {
			_, err = tx.ExecContext(ctx, `UPDATE runs SET status = ?, created = ?, updated = ?, last_seq = ?, turns = ?,
				model = ?, prompt = ?, conversation_id = ?, error = ? WHERE id = ?`, args...)
		} else {
			var meta any // NULL for none
			if info.Meta != "" {
				meta = []byte(info.Meta)
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO runs (status, created, updated, last_seq, turns,
				model, prompt, conversation_id, error, id, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append(args, meta)...)
		}
		if err != nil {
			return err
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO records (run_id, seq, kind, version, time, data) VALUES (?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, r := range prepared {
			var data any // NULL for no data
			if r.Data != nil {
				data = []byte(r.Data)
			}
			if _, err := stmt.ExecContext(ctx, runID, r.Seq, string(r.Kind), r.Version, r.Time.UnixNano(), data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, s.fail(fmt.Sprintf("append to run %q (%s)", runID, unsaved(err)), err)
	}
	return info.LastSeq, nil
}

// Load implements store.Store.
func (s *Store) Load(ctx context.Context, runID string, afterSeq int64) ([]store.Record, error) {
	if err := store.CheckRunID(runID); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	recs, err := s.load(ctx, runID, max(afterSeq, 0))
	if err != nil {
		return nil, s.fail(fmt.Sprintf("load run %q", runID), err)
	}
	return recs, nil
}

func (s *Store) load(ctx context.Context, runID string, afterSeq int64) ([]store.Record, error) {
	// One read transaction: the existence check and the records see the
	// same snapshot.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT last_seq FROM runs WHERE id = ?`, runID).Scan(&last); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.NotFound(runID)
		}
		return nil, err
	}
	out := make([]store.Record, 0, max(0, last-afterSeq))
	rows, err := tx.QueryContext(ctx, `SELECT seq, kind, version, time, data FROM records WHERE run_id = ? AND seq > ? ORDER BY seq`, runID, afterSeq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	next := afterSeq + 1
	for rows.Next() {
		var r store.Record
		var kind string
		var t int64
		var data []byte
		if err := rows.Scan(&r.Seq, &kind, &r.Version, &t, &data); err != nil {
			return nil, err
		}
		r.Kind, r.Time = store.Kind(kind), time.Unix(0, t).UTC()
		if data != nil {
			r.Data = data // database/sql copies []byte destinations
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
	var owner string
	info, err := scanInfo(s.db.QueryRowContext(ctx,
		`SELECT `+infoColumns+`, coalesce((SELECT owner FROM claims WHERE run_id = runs.id AND expires > ?), '')
		FROM runs WHERE id = ?`, time.Now().UnixNano(), runID), true, &owner)
	if errors.Is(err, sql.ErrNoRows) {
		return store.RunInfo{}, store.NotFound(runID)
	}
	if err != nil {
		return store.RunInfo{}, s.fail(fmt.Sprintf("get run %q", runID), err)
	}
	info.Owner = owner
	info.Status = store.Effective(info.Status, owner != "")
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
	limit := int64(f.Limit)
	if limit == 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.db.QueryContext(ctx, `
		SELECT `+infoColumns+`, owner FROM (
			SELECT runs.*, coalesce(claims.owner, '') AS owner,
				CASE WHEN runs.status = 'running' AND claims.owner IS NULL THEN 'interrupted' ELSE runs.status END AS effective
			FROM runs LEFT JOIN claims ON claims.run_id = runs.id AND claims.expires > ?1
			WHERE ?3 = '' OR runs.conversation_id = ?3
		)
		WHERE ?2 = '' OR effective = ?2
		ORDER BY created DESC, id DESC
		LIMIT ?4`,
		time.Now().UnixNano(), string(f.Status), f.ConversationID, limit)
	if err != nil {
		return nil, s.fail("list runs", err)
	}
	defer rows.Close()
	var out []store.RunInfo
	for rows.Next() {
		var owner string
		info, err := scanInfo(rows, true, &owner)
		if err != nil {
			return nil, s.fail("list runs", err)
		}
		info.Owner = owner
		info.Status = store.Effective(info.Status, owner != "")
		out = append(out, info)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list runs", err)
	}
	return out, nil
}

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, runID, owner string, ttl time.Duration) error {
	if err := store.CheckClaim(runID, owner, ttl); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := time.Now()
		if err := checkHolder(ctx, tx, runID, owner, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO claims (run_id, owner, expires) VALUES (?, ?, ?)
			ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, expires = excluded.expires`,
			runID, owner, expiry(now, ttl))
		return err
	})
	if err != nil {
		return s.fail(fmt.Sprintf("claim run %q", runID), err)
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
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := checkHolder(ctx, tx, runID, owner, time.Now()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM claims WHERE run_id = ?`, runID)
		return err
	})
	if err != nil {
		return s.fail(fmt.Sprintf("release run %q", runID), err)
	}
	return nil
}

// expiry is now plus ttl in Unix nanoseconds, which end in 2262: a longer
// claim ends there.
func expiry(now time.Time, ttl time.Duration) int64 {
	if end := time.Unix(0, math.MaxInt64); now.Add(ttl).After(end) {
		return math.MaxInt64
	}
	return now.Add(ttl).UnixNano()
}

// checkHolder fails with a *store.ClaimedError if someone other than owner
// holds a live claim on the run.
func checkHolder(ctx context.Context, tx *sql.Tx, runID, owner string, now time.Time) error {
	var holder string
	var expires int64
	err := tx.QueryRowContext(ctx, `SELECT owner, expires FROM claims WHERE run_id = ?`, runID).Scan(&holder, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if holder != owner && expires > now.UnixNano() {
		return &store.ClaimedError{RunID: runID, Owner: holder, Expires: time.Unix(0, expires).UTC()}
	}
	return nil
}

// History implements store.Store.
func (s *Store) History(ctx context.Context, convID string) ([]llm.Message, error) {
	if convID == "" {
		return nil, fmt.Errorf("%w: history: empty conversation id", store.ErrInvalid)
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT message FROM conversation_messages WHERE conversation_id = ? ORDER BY pos`, convID)
	if err != nil {
		return nil, s.fail(fmt.Sprintf("history of conversation %q", convID), err)
	}
	defer rows.Close()
	out := []llm.Message{}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, s.fail(fmt.Sprintf("history of conversation %q", convID), err)
		}
		m, err := store.DecodeMessage(convID, len(out), b)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(fmt.Sprintf("history of conversation %q", convID), err)
	}
	return out, nil
}

// AppendConversation implements store.Store.
func (s *Store) AppendConversation(ctx context.Context, convID, runID string, msgs []llm.Message) error {
	encoded, err := store.EncodeConversation(convID, runID, msgs)
	if err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		prior, err := runMessages(ctx, tx, convID, runID)
		if err != nil {
			return err
		}
		if prior != nil {
			if slices.EqualFunc(prior, encoded, bytes.Equal) {
				return nil
			}
			return store.ConversationConflict(convID, runID)
		}
		var pos int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(pos), 0) FROM conversation_messages WHERE conversation_id = ?`, convID).Scan(&pos); err != nil {
			return err
		}
		for _, b := range encoded {
			pos++
			if _, err := tx.ExecContext(ctx, `INSERT INTO conversation_messages (conversation_id, pos, run_id, message) VALUES (?, ?, ?, ?)`,
				convID, pos, runID, b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.fail(fmt.Sprintf("append to conversation %q from run %q (%s)", convID, runID, unsaved(err)), err)
	}
	return nil
}

func runMessages(ctx context.Context, tx *sql.Tx, convID, runID string) ([][]byte, error) {
	rows, err := tx.QueryContext(ctx, `SELECT message FROM conversation_messages WHERE conversation_id = ? AND run_id = ? ORDER BY pos`, convID, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
