package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/store"
)

// A process that appended last remembers the run's summary and appends
// without reading it; when another process appended in between, the
// remembered summary is stale and must never be written back.
func TestAppendAfterAnotherProcess(t *testing.T) {
	schema := newSchema(t)
	a, b := openSchema(t, schema, nil), openSchema(t, schema, nil)
	last, err := a.Append(ctx, "r", 0, created(t, store.RunHeader{}), store.Record{Kind: store.KindModelTurn, Data: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	// b moves the run on; a still remembers it at 2.
	if _, err := b.Append(ctx, "r", last, store.Record{Kind: store.KindModelTurn, Data: []byte(`{}`)},
		store.Record{Kind: store.KindRunFailed, Data: []byte(`{"error":"by b"}`)}); err != nil {
		t.Fatal(err)
	}
	_, err = a.Append(ctx, "r", last, note(`"stale"`))
	var ce *store.ConflictError
	if !errors.As(err, &ce) || ce.Expected != 2 || ce.Actual != 4 {
		t.Fatalf("appending after a sequence another process moved past: %v, want a *ConflictError (expected 2, actual 4)", err)
	}
	// Appending after where the journal really ends works, and folds into
	// the summary b wrote, not the one a remembered.
	if _, err := a.Append(ctx, "r", 4, note(`"fresh"`)); err != nil {
		t.Fatal(err)
	}
	info, err := b.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if info.Turns != 2 || info.Status != store.StatusFailed || info.Error != "by b" || info.LastSeq != 5 {
		t.Fatalf("summary after appends by both: %+v, want 2 turns, failed by b, last seq 5", info)
	}
}

// A summary row edited behind the store's back (by hand, or by a newer
// loom that folds records differently) is not overwritten from what the
// store remembered: the compare-and-set of Append fails, the store reads
// the row and folds the records into what is really there.
func TestAppendRereadsAnEditedSummary(t *testing.T) {
	schema := newSchema(t)
	s := openSchema(t, schema, nil)
	last, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{}), store.Record{Kind: store.KindModelTurn, Data: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, admin(t), schema, `UPDATE {s}.runs SET turns = 40`)
	if _, err := s.Append(ctx, "r", last, store.Record{Kind: store.KindModelTurn, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Get(ctx, "r"); err != nil || info.Turns != 41 {
		t.Fatalf("after an append to an edited summary: %+v, %v; want 41 turns (40 + 1)", info, err)
	}
}

// Any string comes back exactly as given, and ids sort byte by byte:
// NUL bytes, invalid UTF-8, backslashes and bytea escapes included (a text
// column refuses the first two; a string sent for a bytea column would
// have the last two read as escapes).
func TestStringsAreKeptExactly(t *testing.T) {
	s := openTest(t, &Options{ClaimClock: time.Now})
	weird := []string{"a\x00b", "\xff\xfe", `\x41`, `\\`, "é", "B", "a", "run 1"}
	// What goes through JSON (the header, the run_failed record, messages)
	// comes back as JSON gives it: invalid UTF-8 replaced.
	viaJSON := func(s string) string {
		b, _ := json.Marshal(s)
		var out string
		json.Unmarshal(b, &out)
		return out
	}
	for _, id := range weird {
		h := store.RunHeader{Model: "m" + id, Prompt: "p" + id, ConversationID: "c" + id}
		last, err := s.Append(ctx, id, 0, created(t, h))
		if err != nil {
			t.Fatalf("Append(%q): %v", id, err)
		}
		failed, err := store.NewRecord(store.KindRunFailed, map[string]string{"error": "e" + id})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, id, last, failed); err != nil {
			t.Fatalf("Append(%q): %v", id, err)
		}
		if err := s.Claim(ctx, id, "o"+id, time.Hour); err != nil {
			t.Fatalf("Claim(%q): %v", id, err)
		}
		if err := s.AppendConversation(ctx, "c"+id, id, []llm.Message{llm.UserText("u" + id)}); err != nil {
			t.Fatalf("AppendConversation(%q): %v", id, err)
		}
	}
	for _, id := range weird {
		info, err := s.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get(%q): %v", id, err)
		}
		if info.ID != id || info.Owner != "o"+id || info.Model != viaJSON("m"+id) || info.Prompt != viaJSON("p"+id) ||
			info.ConversationID != viaJSON("c"+id) || info.Error != viaJSON("e"+id) {
			t.Errorf("Get(%q) = %+v", id, info)
		}
		if runs, err := s.List(ctx, store.Filter{ConversationID: viaJSON("c" + id)}); err != nil || len(runs) != 1 || runs[0].ID != id {
			t.Errorf("List of conversation %q: %+v, %v", viaJSON("c"+id), runs, err)
		}
		if h, err := s.History(ctx, "c"+id); err != nil || len(h) != 1 || h[0].Text() != viaJSON("u"+id) {
			t.Errorf("History(%q) = %v, %v", "c"+id, h, err)
		}
		if err := s.Release(ctx, id, "o"+id); err != nil {
			t.Errorf("Release(%q): %v", id, err)
		}
	}
	// Equal creation times: List orders by id, byte-wise, descending.
	ref := store.NewMemory()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range weird {
		for _, st := range []store.Store{s, ref} {
			c := created(t, store.RunHeader{})
			c.Time = t0
			if _, err := st.Append(ctx, "same-time "+id, 0, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	order := func(st store.Store) string {
		runs, err := st.List(ctx, store.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range runs {
			if strings.HasPrefix(r.ID, "same-time ") {
				ids = append(ids, r.ID)
			}
		}
		return strings.Join(ids, "|")
	}
	if got, want := order(s), order(ref); got != want {
		t.Errorf("List orders runs created at one time as\n%q\nthe in-memory store as\n%q", got, want)
	}
}

// One Append is one statement; its records' data is bounded so that the
// statement stays within what the server takes, and a larger batch is
// refused before anything is sent.
func TestBatchSizeIsBounded(t *testing.T) {
	s := openTest(t, nil)
	last, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{}))
	if err != nil {
		t.Fatal(err)
	}
	big := []byte(`"` + strings.Repeat("x", store.MaxDataSize-2) + `"`) // one buffer shared by every record
	recs := make([]store.Record, MaxBatchBytes/store.MaxDataSize+1)
	for i := range recs {
		recs[i] = store.Record{Kind: store.KindToolResult, Data: big}
	}
	_, err = s.Append(ctx, "r", last, recs...)
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "smaller batches") {
		t.Fatalf("a batch of %d MiB: %v, want ErrInvalid saying to split it", len(recs)*len(big)>>20, err)
	}
	if info, err := s.Get(ctx, "r"); err != nil || info.LastSeq != last {
		t.Fatalf("a refused batch moved the journal: %+v, %v", info, err)
	}
	// Within the bound the same records go in.
	if _, err := s.Append(ctx, "r", last, recs[0]); err != nil {
		t.Fatalf("one record of %d MiB: %v", len(big)>>20, err)
	}
}

// Records and conversation messages written by a newer loom are refused on
// read with an error naming the record, not misread.
func TestNewerRecordsAreRefused(t *testing.T) {
	schema := newSchema(t)
	s := openSchema(t, schema, nil)
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{}), note(`1`), note(`2`)); err != nil {
		t.Fatal(err)
	}
	db := admin(t)
	for _, c := range []struct {
		update, want string
	}{
		{`UPDATE {s}.records SET version = 2 WHERE seq = 2`, "format version 2"},
		{`UPDATE {s}.records SET version = 1, kind = 'tool_progress' WHERE seq = 2`, `kind "tool_progress"`},
	} {
		run(t, db, schema, c.update)
		_, err := s.Load(ctx, "r", 0)
		var ve *store.VersionError
		if !errors.As(err, &ve) || ve.Seq != 2 || ve.RunID != "r" {
			t.Fatalf("after %s: Load error %v, want a *VersionError for record 2", c.update, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %q does not say %q", err, c.want)
		}
		if recs, err := s.Load(ctx, "r", 2); err != nil || len(recs) != 1 {
			t.Errorf("records after the unknown one: %v, %v", recs, err)
		}
	}
	run(t, db, schema, `INSERT INTO {s}.conversation_messages VALUES ('c', 1, 'r', convert_to('{"role":"user","parts":[{"type":"hologram"}]}', 'UTF8'))`)
	if _, err := s.History(ctx, "c"); !errors.Is(err, store.ErrVersion) || !strings.Contains(err.Error(), "hologram") {
		t.Fatalf("History with a message of an unknown part type: %v, want ErrVersion naming it", err)
	}
}

// A damaged journal (a record deleted behind the store's back) is reported,
// not returned with a hole in it.
func TestDamagedJournalIsReported(t *testing.T) {
	schema := newSchema(t)
	s := openSchema(t, schema, nil)
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{}), note(`1`), note(`2`), note(`3`)); err != nil {
		t.Fatal(err)
	}
	db := admin(t)
	run(t, db, schema, `DELETE FROM {s}.records WHERE seq = 3`)
	if _, err := s.Load(ctx, "r", 0); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Load of a journal with a gap: %v", err)
	}
	run(t, db, schema, `DELETE FROM {s}.records WHERE seq = 4`)
	if _, err := s.Load(ctx, "r", 0); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Load of a journal missing its tail: %v", err)
	}
}

// Concurrent AppendConversation calls, for one conversation from several
// runs and for one run several times, from two pools: every run's messages
// are there once, contiguous and in order, and positions are dense.
func TestConcurrentConversationAppends(t *testing.T) {
	schema := newSchema(t)
	a, b := openSchema(t, schema, nil), openSchema(t, schema, nil)
	const runs = 6
	msgs := func(r int) []llm.Message {
		return []llm.Message{llm.UserText(strings.Repeat("q", r+1)), llm.AssistantText(strings.Repeat("a", r+1))}
	}
	errs := make(chan error, 4*runs)
	var wg sync.WaitGroup
	for r := range runs {
		for _, s := range []*Store{a, b, a, b} {
			wg.Go(func() {
				runID := "run" + strings.Repeat("x", r)
				if err := s.AppendConversation(ctx, "conv", runID, msgs(r)); err != nil {
					errs <- fmt.Errorf("%s: %w", runID, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	h, err := a.History(ctx, "conv")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2*runs {
		t.Fatalf("History holds %d messages, want %d", len(h), 2*runs)
	}
	seen := map[string]bool{}
	for i := 0; i < len(h); i += 2 {
		q, ans := h[i].Text(), h[i+1].Text()
		if len(q) != len(ans) || strings.Trim(q, "q") != "" || strings.Trim(ans, "a") != "" || seen[q] {
			t.Fatalf("messages %d and %d are %q and %q: not one run's pair, or a pair seen twice", i, i+1, q, ans)
		}
		seen[q] = true
	}
	var n int64
	if err := admin(t).QueryRow(ctx, `SELECT messages FROM `+schema+`.conversations WHERE id = 'conv'`).Scan(&n); err != nil || n != 2*runs {
		t.Fatalf("the conversation counts %d messages (%v), want %d", n, err, 2*runs)
	}
}
