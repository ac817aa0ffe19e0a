package postgres

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// queries are the store's statements with its schema filled in.
type queries struct {
	createRun, appendRun     string
	summary, lastSeq         string
	load, get, list          string
	claim, release, holder   string
	history, lockConv        string
	runMessages, addMessages string
	putBlob, getBlob         string
}

// summaryColumns are what Append folds records into; infoColumns add meta,
// which only run_created sets, so appends never copy it.
const (
	summaryColumns = `id, status, created, updated, last_seq, turns, model, prompt, conversation_id, error`
	infoColumns    = summaryColumns + `, meta`
)

// recordsFrom is the records of one Append, given as five arrays
// (sequences, kinds, versions, times, data) from argument $first on.
func recordsFrom(first int) string {
	a := func(i int) string { return "$" + strconv.Itoa(first+i) }
	return `unnest(` + a(0) + `::bigint[], ` + a(1) + `::text[], ` + a(2) + `::integer[], ` + a(3) + `::bigint[], ` + a(4) + `::bytea[]) AS r (seq, kind, version, time, data)`
}

// The claim clock: the argument (when Options.ClaimClock is set) or the
// server's.
func clockArg(n string) string { return `coalesce($` + n + `::timestamptz, statement_timestamp())` }

func newQueries(schema string) queries {
	s := pgx.Identifier{schema}.Sanitize()
	q := queries{
		// A new run: its summary row and its records in one statement, or
		// nothing at all if the run exists.
		createRun: `
			WITH run AS (
				INSERT INTO {s}.runs (` + infoColumns + `)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
				ON CONFLICT (id) DO NOTHING
				RETURNING id)
			INSERT INTO {s}.records (run_id, seq, kind, version, time, data)
			SELECT run.id, r.seq, r.kind, r.version, r.time, r.data FROM run, ` + recordsFrom(12),

		// An append: the summary row moves from the state the records were
		// folded from ($16 to $24) to the new one ($2 to $10), and the
		// records go in, only if the row still is in that state. Every
		// append moves last_seq on, so a row in that state has exactly the
		// journal the caller expected.
		appendRun: `
			WITH run AS (
				UPDATE {s}.runs SET status = $2, created = $3, updated = $4, last_seq = $5, turns = $6,
					model = $7, prompt = $8, conversation_id = $9, error = $10
				WHERE id = $1 AND status = $16 AND created = $17 AND updated = $18 AND last_seq = $19 AND turns = $20
					AND model = $21 AND prompt = $22 AND conversation_id = $23 AND error = $24
				RETURNING id)
			INSERT INTO {s}.records (run_id, seq, kind, version, time, data)
			SELECT run.id, r.seq, r.kind, r.version, r.time, r.data FROM run, ` + recordsFrom(11),

		summary: `SELECT ` + summaryColumns + ` FROM {s}.runs WHERE id = $1`,
		lastSeq: `SELECT last_seq FROM {s}.runs WHERE id = $1`,

		// One statement, so one snapshot: the run's last sequence and its
		// records agree.
		load: `
			SELECT runs.last_seq, r.seq, r.kind, r.version, r.time, r.data
			FROM {s}.runs LEFT JOIN {s}.records r ON r.run_id = runs.id AND r.seq > $2
			WHERE runs.id = $1
			ORDER BY r.seq`,

		get: `
			SELECT ` + infoColumns + `,
				coalesce((SELECT owner FROM {s}.claims WHERE run_id = runs.id AND expires > ` + clockArg("2") + `), ''::bytea)
			FROM {s}.runs WHERE id = $1`,

		list: `
			SELECT ` + infoColumns + `, owner FROM (
				SELECT runs.*, coalesce(claims.owner, ''::bytea) AS owner,
					CASE WHEN runs.status = 'running' AND claims.owner IS NULL THEN 'interrupted' ELSE runs.status END AS effective
				FROM {s}.runs LEFT JOIN {s}.claims ON claims.run_id = runs.id AND claims.expires > ` + clockArg("1") + `
				WHERE $3::bytea IS NULL OR runs.conversation_id = $3
			) AS runs
			WHERE $2::text = '' OR effective = $2
			ORDER BY created DESC, id DESC
			LIMIT $4::bigint`,

		// Take the claim if it is free, lapsed or the owner's own; the row
		// is locked either way, so of two claimers one waits for the other.
		claim: `
			INSERT INTO {s}.claims AS c (run_id, owner, expires)
			VALUES ($1, $2, ` + clockArg("4") + ` + $3::bigint * interval '1 microsecond')
			ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, expires = excluded.expires
			WHERE c.owner = excluded.owner OR c.expires <= ` + clockArg("4") + `
			RETURNING c.expires`,
		release: `DELETE FROM {s}.claims WHERE run_id = $1 AND (owner = $2 OR expires <= ` + clockArg("3") + `)`,
		holder:  `SELECT owner, expires, expires > ` + clockArg("2") + ` FROM {s}.claims WHERE run_id = $1`,

		history: `SELECT message FROM {s}.conversation_messages WHERE conversation_id = $1 ORDER BY pos`,
		// The conversation's row, locked until the transaction ends: its
		// appenders go one at a time. It returns how many messages it has.
		lockConv: `
			INSERT INTO {s}.conversations AS c (id, messages) VALUES ($1, 0)
			ON CONFLICT (id) DO UPDATE SET messages = c.messages
			RETURNING messages`,
		runMessages: `SELECT message FROM {s}.conversation_messages WHERE conversation_id = $1 AND run_id = $2 ORDER BY pos`,
		addMessages: `
			WITH added AS (
				INSERT INTO {s}.conversation_messages (conversation_id, pos, run_id, message)
				SELECT $1, $3::bigint + m.n, $2, m.message FROM unnest($4::bytea[]) WITH ORDINALITY AS m (message, n)
				RETURNING 1)
			UPDATE {s}.conversations SET messages = $3::bigint + (SELECT count(*) FROM added) WHERE id = $1`,

		putBlob: `INSERT INTO {s}.blobs (key, data) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`,
		// The data only if it is within the bound; its length either way.
		getBlob: `SELECT CASE WHEN length(data) <= $2 THEN data END, length(data) FROM {s}.blobs WHERE key = $1`,
	}
	for _, p := range []*string{&q.createRun, &q.appendRun, &q.summary, &q.lastSeq, &q.load, &q.get, &q.list,
		&q.claim, &q.release, &q.holder, &q.history, &q.lockConv, &q.runMessages, &q.addMessages, &q.putBlob, &q.getBlob} {
		*p = strings.ReplaceAll(*p, "{s}", s)
	}
	return q
}
