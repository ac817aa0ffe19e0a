// Package storetest is the conformance suite for store.Store
// implementations. A backend's test calls Run with a constructor:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := mystore.Open(filepath.Join(t.TempDir(), "x.db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// newStore is called once per subtest, with that subtest's t, and must return
// an empty store. Some subtests call it inside a testing/synctest bubble (to
// let claims expire on the fake clock): a store must then do all its work in
// goroutines it stops on Close, and cleanups registered with the given t run
// inside the bubble.
//
// The suite checks ordering and dense numbering, optimistic conflicts,
// atomic batches, argument checks, record versions, large records, claims and
// their expiry, concurrent appenders and claimers (exactly one wins), run
// listing and status, run metadata, conversations, use after Close and cancelled contexts.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/store"
)

// Run runs the conformance suite against the stores newStore returns.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore func(t *testing.T) store.Store)
	}{
		{"AppendAndLoad", testAppendAndLoad},
		{"LoadAfter", testLoadAfter},
		{"NewRunRules", testNewRunRules},
		{"Conflict", testConflict},
		{"BatchIsAtomic", testBatchIsAtomic},
		{"InvalidArguments", testInvalidArguments},
		{"Versions", testVersions},
		{"Times", testTimes},
		{"DataIsCopied", testDataIsCopied},
		{"LargeRecords", testLargeRecords},
		{"ConcurrentAppenders", testConcurrentAppenders},
		{"Claims", testClaims},
		{"ClaimExpiry", testClaimExpiry},
		{"ConcurrentClaims", testConcurrentClaims},
		{"LongestClaim", testLongestClaim},
		{"RunInfo", testRunInfo},
		{"Meta", testMeta},
		{"Statuses", testStatuses},
		{"List", testList},
		{"Conversations", testConversations},
		{"NotFound", testNotFound},
		{"Closed", testClosed},
		{"CancelledContext", testCancelledContext},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore) })
	}
}

var ctx = context.Background()

// created returns a run_created record with header h and some extra payload,
// as a driver would write it.
func created(t *testing.T, h store.RunHeader) store.Record {
	t.Helper()
	rec, err := store.NewRecord(store.KindRunCreated, struct {
		store.RunHeader
		Config map[string]any `json:"config"`
	}{h, map[string]any{"max_turns": 8}})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func rec(kind store.Kind, data string) store.Record {
	var raw json.RawMessage
	if data != "" {
		raw = json.RawMessage(data)
	}
	return store.Record{Kind: kind, Data: raw}
}

func mustAppend(t *testing.T, s store.Store, runID string, expected int64, recs ...store.Record) int64 {
	t.Helper()
	last, err := s.Append(ctx, runID, expected, recs...)
	if err != nil {
		t.Fatalf("Append(%q, %d, %d records): %v", runID, expected, len(recs), err)
	}
	if want := expected + int64(len(recs)); last != want {
		t.Fatalf("Append(%q, %d, %d records) returned last seq %d, want %d", runID, expected, len(recs), last, want)
	}
	return last
}

func mustLoad(t *testing.T, s store.Store, runID string, after int64) []store.Record {
	t.Helper()
	recs, err := s.Load(ctx, runID, after)
	if err != nil {
		t.Fatalf("Load(%q, %d): %v", runID, after, err)
	}
	return recs
}

func mustGet(t *testing.T, s store.Store, runID string) store.RunInfo {
	t.Helper()
	info, err := s.Get(ctx, runID)
	if err != nil {
		t.Fatalf("Get(%q): %v", runID, err)
	}
	return info
}

// describe renders records as "seq:kind:data" lines for comparison.
func describe(recs []store.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%d:%s:v%d:%s\n", r.Seq, r.Kind, r.Version, r.Data)
	}
	return b.String()
}

func wantError(t *testing.T, what string, err, target error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one matching %v", what, target)
	}
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %q (%T) does not match %v", what, err, err, target)
	}
}

func testAppendAndLoad(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	first := created(t, store.RunHeader{Model: "m"})
	last := mustAppend(t, s, "r1", 0, first)
	last = mustAppend(t, s, "r1", last, rec(store.KindModelTurn, `{"turn":1}`), rec(store.KindToolIntent, `{"id":"c1"}`))
	last = mustAppend(t, s, "r1", last, rec(store.KindToolResult, `{"id":"c1","content":"ok"}`))
	mustAppend(t, s, "r1", last, rec(store.KindNote, ""))

	// Another run's records never mix in.
	mustAppend(t, s, "r2", 0, created(t, store.RunHeader{}))

	got := mustLoad(t, s, "r1", 0)
	want := fmt.Sprintf("1:run_created:v1:%s\n2:model_turn:v1:{\"turn\":1}\n3:tool_intent:v1:{\"id\":\"c1\"}\n4:tool_result:v1:{\"id\":\"c1\",\"content\":\"ok\"}\n5:note:v1:\n", first.Data)
	if d := describe(got); d != want {
		t.Fatalf("Load returned\n%swant\n%s", d, want)
	}
	if got[4].Data != nil {
		t.Errorf("a record appended without data loads with data %q, want nil", got[4].Data)
	}
	if d := describe(mustLoad(t, s, "r2", 0)); !strings.HasPrefix(d, "1:run_created:") || strings.Count(d, "\n") != 1 {
		t.Errorf("run r2 loads as\n%s", d)
	}
}

func testLoadAfter(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	last := mustAppend(t, s, "r", 0, created(t, store.RunHeader{}))
	for i := range 5 {
		last = mustAppend(t, s, "r", last, rec(store.KindNote, fmt.Sprint(i)))
	}
	for _, after := range []int64{-3, 0, 1, 3, 5, 6, 7, 100} {
		got := mustLoad(t, s, "r", after)
		from := max(after+1, 1)
		wantN := max(0, 6-max(after, 0))
		if int64(len(got)) != wantN {
			t.Fatalf("Load(after %d) returned %d records, want %d", after, len(got), wantN)
		}
		if got == nil {
			t.Fatalf("Load(after %d) returned a nil slice, want an empty one", after)
		}
		for i, r := range got {
			if r.Seq != from+int64(i) {
				t.Fatalf("Load(after %d)[%d].Seq = %d, want %d", after, i, r.Seq, from+int64(i))
			}
		}
	}
}

func testNewRunRules(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	_, err := s.Append(ctx, "r", 0, rec(store.KindModelTurn, `{}`))
	wantError(t, "a new run starting with model_turn", err, store.ErrInvalid)
	if !strings.Contains(err.Error(), "run_created") {
		t.Errorf("error %q does not say the first record must be run_created", err)
	}
	_, err = s.Append(ctx, "r", 3, rec(store.KindModelTurn, `{}`))
	wantError(t, "appending after record 3 of a run that does not exist", err, store.ErrNotFound)
	if _, err := s.Get(ctx, "r"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused appends created run r anyway: Get error %v", err)
	}

	last := mustAppend(t, s, "r", 0, created(t, store.RunHeader{}), rec(store.KindModelTurn, `{}`))
	_, err = s.Append(ctx, "r", last, created(t, store.RunHeader{}))
	wantError(t, "a second run_created", err, store.ErrInvalid)

	_, err = s.Append(ctx, "r", 0, created(t, store.RunHeader{}))
	wantError(t, "creating run r twice", err, store.ErrConflict)
	var ce *store.ConflictError
	if !errors.As(err, &ce) || ce.RunID != "r" || ce.Expected != 0 || ce.Actual != 2 {
		t.Fatalf("creating run r twice: error %#v, want *ConflictError{r, 0, 2}", err)
	}
	if n := len(mustLoad(t, s, "r", 0)); n != 2 {
		t.Fatalf("after refused appends run r has %d records, want 2", n)
	}
}

func testConflict(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	last := mustAppend(t, s, "r", 0, created(t, store.RunHeader{}), rec(store.KindModelTurn, `1`), rec(store.KindModelTurn, `2`))
	before := describe(mustLoad(t, s, "r", 0))
	for _, expected := range []int64{1, 2, 4, 50} {
		_, err := s.Append(ctx, "r", expected, rec(store.KindNote, `"stale"`))
		wantError(t, fmt.Sprintf("append after %d to a journal ending at %d", expected, last), err, store.ErrConflict)
		var ce *store.ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("conflict error %T is not a *ConflictError", err)
		}
		if ce.RunID != "r" || ce.Expected != expected || ce.Actual != last {
			t.Fatalf("ConflictError = %+v, want run r, expected %d, actual %d", *ce, expected, last)
		}
		if !strings.Contains(err.Error(), "reload") {
			t.Errorf("conflict message %q does not say what to do", err)
		}
	}
	if after := describe(mustLoad(t, s, "r", 0)); after != before {
		t.Fatalf("refused appends changed the journal:\n%s\nwas\n%s", after, before)
	}
	mustAppend(t, s, "r", last, rec(store.KindNote, `"fresh"`))
}

func testBatchIsAtomic(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	last := mustAppend(t, s, "r", 0, created(t, store.RunHeader{}))
	bad := [][]store.Record{
		{rec(store.KindModelTurn, `{}`), rec(store.KindToolIntent, `{not json`)},
		{rec(store.KindModelTurn, `{}`), {Kind: "tool_teleport"}},
		{rec(store.KindModelTurn, `{}`), {Kind: store.KindNote, Version: 2}},
		{rec(store.KindModelTurn, `{}`), created(t, store.RunHeader{})},
		{rec(store.KindModelTurn, `{}`), rec(store.KindRunFailed, `{"error":17}`)},
	}
	for i, batch := range bad {
		if _, err := s.Append(ctx, "r", last, batch...); err == nil {
			t.Fatalf("batch %d with a bad second record was accepted", i)
		}
		if got := mustLoad(t, s, "r", 0); len(got) != 1 {
			t.Fatalf("batch %d with a bad second record left %d records, want 1:\n%s", i, len(got), describe(got))
		}
		if info := mustGet(t, s, "r"); info.LastSeq != 1 || info.Turns != 0 {
			t.Fatalf("batch %d with a bad second record changed the run info: %+v", i, info)
		}
	}
	mustAppend(t, s, "r", last, rec(store.KindModelTurn, `{}`), rec(store.KindToolIntent, `{}`))
}

func testInvalidArguments(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	last := mustAppend(t, s, "r", 0, created(t, store.RunHeader{}))
	cases := []struct {
		name string
		call func() error
	}{
		{"empty run id", func() error { _, err := s.Append(ctx, "", 0, created(t, store.RunHeader{})); return err }},
		{"run id too long", func() error {
			_, err := s.Append(ctx, strings.Repeat("x", 300), 0, created(t, store.RunHeader{}))
			return err
		}},
		{"no records", func() error { _, err := s.Append(ctx, "r", last); return err }},
		{"negative expected", func() error { _, err := s.Append(ctx, "r", -1, rec(store.KindNote, "")); return err }},
		{"unknown kind", func() error { _, err := s.Append(ctx, "r", last, rec("tool_teleport", "")); return err }},
		{"empty kind", func() error { _, err := s.Append(ctx, "r", last, rec("", "")); return err }},
		{"data not JSON", func() error { _, err := s.Append(ctx, "r", last, rec(store.KindNote, "{")); return err }},
		{"data two JSON values", func() error { _, err := s.Append(ctx, "r", last, rec(store.KindNote, "1 2")); return err }},
		{"wrong seq", func() error {
			_, err := s.Append(ctx, "r", last, store.Record{Seq: 7, Kind: store.KindNote})
			return err
		}},
		{"time before 1970", func() error {
			_, err := s.Append(ctx, "r", last, store.Record{Kind: store.KindNote, Time: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)})
			return err
		}},
		{"run_created header with wrong types", func() error {
			_, err := s.Append(ctx, "r2", 0, rec(store.KindRunCreated, `{"model":42}`))
			return err
		}},
		{"run_created data not an object", func() error {
			_, err := s.Append(ctx, "r2", 0, rec(store.KindRunCreated, `[1,2]`))
			return err
		}},
		{"claim with empty owner", func() error { return s.Claim(ctx, "r", "", time.Minute) }},
		{"claim with zero ttl", func() error { return s.Claim(ctx, "r", "a", 0) }},
		{"claim with negative ttl", func() error { return s.Claim(ctx, "r", "a", -time.Second) }},
		{"claim with empty run id", func() error { return s.Claim(ctx, "", "a", time.Minute) }},
		{"release with empty owner", func() error { return s.Release(ctx, "r", "") }},
		{"load with empty run id", func() error { _, err := s.Load(ctx, "", 0); return err }},
		{"get with empty run id", func() error { _, err := s.Get(ctx, ""); return err }},
		{"list with negative limit", func() error { _, err := s.List(ctx, store.Filter{Limit: -1}); return err }},
		{"history of empty conversation id", func() error { _, err := s.History(ctx, ""); return err }},
		{"conversation with empty id", func() error {
			return s.AppendConversation(ctx, "", "r", []llm.Message{llm.UserText("hi")})
		}},
		{"conversation with empty run id", func() error {
			return s.AppendConversation(ctx, "c", "", []llm.Message{llm.UserText("hi")})
		}},
		{"conversation without messages", func() error { return s.AppendConversation(ctx, "c", "r", nil) }},
		{"conversation message with nil part", func() error {
			return s.AppendConversation(ctx, "c", "r", []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{nil}}})
		}},
	}
	for _, c := range cases {
		err := c.call()
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: error %v, want one matching store.ErrInvalid", c.name, err)
		}
	}
	if got := mustLoad(t, s, "r", 0); len(got) != 1 {
		t.Fatalf("invalid appends wrote records:\n%s", describe(got))
	}
	if _, err := s.Get(ctx, "r2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused run_created created the run: Get error %v", err)
	}
	if h, err := s.History(ctx, "c"); err != nil || len(h) != 0 {
		t.Fatalf("refused conversation appends stored messages: %v, %v", h, err)
	}
	if info := mustGet(t, s, "r"); info.Owner != "" {
		t.Fatalf("a refused claim took effect: owner %q", info.Owner)
	}
}

func testVersions(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	last := mustAppend(t, s, "r", 0, store.Record{Kind: store.KindRunCreated, Version: store.Version, Data: json.RawMessage(`{}`)})
	last = mustAppend(t, s, "r", last, store.Record{Kind: store.KindNote}) // zero version means the current one
	for _, r := range mustLoad(t, s, "r", 0) {
		if r.Version != store.Version {
			t.Fatalf("record %d loads with version %d, want %d", r.Seq, r.Version, store.Version)
		}
	}
	for _, v := range []int{store.Version + 1, 99, -1} {
		_, err := s.Append(ctx, "r", last, store.Record{Kind: store.KindModelTurn, Version: v, Data: json.RawMessage(`{}`)})
		wantError(t, fmt.Sprintf("a record of version %d", v), err, store.ErrVersion)
		var ve *store.VersionError
		if !errors.As(err, &ve) || ve.Version != v || ve.Seq != last+1 || ve.Kind != store.KindModelTurn || ve.RunID != "r" {
			t.Fatalf("version %d: error %#v, want a *VersionError naming run r, record %d, model_turn, version %d", v, err, last+1, v)
		}
		if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(v)) || !strings.Contains(msg, "version 1") {
			t.Errorf("version error %q does not name both versions", msg)
		}
	}
	if n := len(mustLoad(t, s, "r", 0)); n != 2 {
		t.Fatalf("refused versions wrote records: %d records, want 2", n)
	}
}

func testTimes(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	before := time.Now()
	last := mustAppend(t, s, "r", 0, created(t, store.RunHeader{}))
	after := time.Now()
	// Nanoseconds and a zone other than UTC must survive as the same instant.
	zone := time.FixedZone("X", 5*3600+30*60)
	explicit := time.Date(2031, 4, 5, 6, 7, 8, 123456789, zone)
	mustAppend(t, s, "r", last, store.Record{Kind: store.KindNote, Time: explicit})
	got := mustLoad(t, s, "r", 0)
	if tm := got[0].Time; tm.Before(before.Truncate(time.Microsecond)) || tm.After(after.Add(time.Microsecond)) {
		t.Errorf("a record appended with a zero time got %v, want the store's clock between %v and %v", tm, before, after)
	}
	if !got[1].Time.Equal(explicit) {
		t.Errorf("record time %v loads as %v", explicit, got[1].Time)
	}
	if loc := got[1].Time.Location(); loc != time.UTC {
		t.Errorf("loaded time is in %v, want UTC", loc)
	}
	info := mustGet(t, s, "r")
	if !info.Created.Equal(got[0].Time) || !info.Updated.Equal(explicit) {
		t.Errorf("RunInfo times Created %v Updated %v, want %v and %v", info.Created, info.Updated, got[0].Time, explicit)
	}
}

func testDataIsCopied(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	data := []byte(`{"v":"original"}`)
	mustAppend(t, s, "r", 0, store.Record{Kind: store.KindRunCreated, Data: data})
	copy(data, `{"v":"CHANGED!"}`)
	got := mustLoad(t, s, "r", 0)
	if string(got[0].Data) != `{"v":"original"}` {
		t.Fatalf("Append kept the caller's slice: stored data became %s", got[0].Data)
	}
	copy(got[0].Data, `{"v":"CHANGED!"}`)
	if again := mustLoad(t, s, "r", 0); string(again[0].Data) != `{"v":"original"}` {
		t.Fatalf("Load shared storage with the caller: data became %s", again[0].Data)
	}
}

func testLargeRecords(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	last := mustAppend(t, s, "r", 0, created(t, store.RunHeader{}))
	var b bytes.Buffer
	b.WriteString(`{"content":"`)
	for i := 0; b.Len() < 8<<20; i++ {
		fmt.Fprintf(&b, "line %d of a long tool result\\n", i)
	}
	b.WriteString(`"}`)
	big := b.Bytes()
	last = mustAppend(t, s, "r", last, rec(store.KindToolResult, string(big)))
	mustAppend(t, s, "r", last, rec(store.KindNote, `"after"`))
	got := mustLoad(t, s, "r", 0)
	if len(got) != 3 || !bytes.Equal(got[1].Data, big) || string(got[2].Data) != `"after"` {
		t.Fatalf("an 8 MiB record did not load back intact (%d records, record 2 holds %d bytes, want %d)", len(got), len(got[1].Data), len(big))
	}

	tooBig := make([]byte, store.MaxDataSize+1)
	tooBig[0], tooBig[len(tooBig)-1] = '"', '"'
	for i := 1; i < len(tooBig)-1; i++ {
		tooBig[i] = 'a'
	}
	_, err := s.Append(ctx, "r", 3, store.Record{Kind: store.KindToolResult, Data: tooBig})
	wantError(t, "a record over MaxDataSize", err, store.ErrInvalid)
	if !strings.Contains(err.Error(), "truncate") {
		t.Errorf("size error %q does not say what to do", err)
	}
	if info := mustGet(t, s, "r"); info.LastSeq != 3 {
		t.Fatalf("a refused huge record moved the journal to %d", info.LastSeq)
	}
}

// testConcurrentAppenders races writers that each append a tagged record
// after the sequence they last saw, retrying on conflict. Every sequence must
// be won by exactly one writer: the journal is dense, and each writer's wins
// are exactly the records carrying its tag.
func testConcurrentAppenders(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	mustAppend(t, s, "r", 0, created(t, store.RunHeader{}))
	const writers, each = 4, 15
	type win struct {
		writer, n int
		seq       int64
	}
	var (
		mu        sync.Mutex
		wins      []win
		conflicts int
		wg        sync.WaitGroup
		errs      = make(chan error, writers)
	)
	for w := range writers {
		wg.Go(func() {
			for n := 0; n < each; {
				info, err := s.Get(ctx, "r")
				if err != nil {
					errs <- err
					return
				}
				data := fmt.Sprintf(`{"writer":%d,"n":%d}`, w, n)
				seq, err := s.Append(ctx, "r", info.LastSeq, rec(store.KindNote, data))
				if errors.Is(err, store.ErrConflict) {
					mu.Lock()
					conflicts++
					mu.Unlock()
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
				if seq != info.LastSeq+1 {
					errs <- fmt.Errorf("writer %d appended after %d but got seq %d", w, info.LastSeq, seq)
					return
				}
				mu.Lock()
				wins = append(wins, win{w, n, seq})
				mu.Unlock()
				n++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := mustLoad(t, s, "r", 0)
	if len(got) != 1+writers*each {
		t.Fatalf("journal has %d records, want %d", len(got), 1+writers*each)
	}
	bySeq := map[int64]win{}
	for _, w := range wins {
		if prev, dup := bySeq[w.seq]; dup {
			t.Fatalf("seq %d won by both writer %d and writer %d", w.seq, prev.writer, w.writer)
		}
		bySeq[w.seq] = w
	}
	for i, r := range got {
		if r.Seq != int64(i+1) {
			t.Fatalf("record %d has seq %d: the journal is not dense", i, r.Seq)
		}
		if i == 0 {
			continue
		}
		w, ok := bySeq[r.Seq]
		if !ok {
			t.Fatalf("record %d is in the journal but no writer was told it won it", r.Seq)
		}
		if want := fmt.Sprintf(`{"writer":%d,"n":%d}`, w.writer, w.n); string(r.Data) != want {
			t.Fatalf("record %d holds %s, but the winner appended %s", r.Seq, r.Data, want)
		}
	}
	t.Logf("%d appends, %d lost races", len(wins), conflicts)
}

func testClaims(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	mustAppend(t, s, "r", 0, created(t, store.RunHeader{}))
	if err := s.Claim(ctx, "r", "alpha", time.Hour); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if info := mustGet(t, s, "r"); info.Owner != "alpha" || info.Status != store.StatusRunning {
		t.Fatalf("claimed run shows owner %q status %q, want alpha and running", info.Owner, info.Status)
	}
	err := s.Claim(ctx, "r", "beta", time.Hour)
	wantError(t, "claiming a run another owner holds", err, store.ErrClaimed)
	var ce *store.ClaimedError
	if !errors.As(err, &ce) || ce.Owner != "alpha" || ce.RunID != "r" {
		t.Fatalf("claim error %#v does not name holder alpha of run r", err)
	}
	if time.Until(ce.Expires) < 50*time.Minute || time.Until(ce.Expires) > 61*time.Minute {
		t.Errorf("claim error says the claim expires at %v, want about an hour from now", ce.Expires)
	}
	if !strings.Contains(err.Error(), `"alpha"`) {
		t.Errorf("claim error %q does not name the holder", err)
	}
	if err := s.Claim(ctx, "r", "alpha", time.Hour); err != nil {
		t.Fatalf("the holder renewing its claim: %v", err)
	}
	wantError(t, "another owner releasing the claim", s.Release(ctx, "r", "beta"), store.ErrClaimed)
	if info := mustGet(t, s, "r"); info.Owner != "alpha" {
		t.Fatalf("a refused release dropped the claim: owner %q", info.Owner)
	}
	if err := s.Release(ctx, "r", "alpha"); err != nil {
		t.Fatalf("release by the holder: %v", err)
	}
	if err := s.Release(ctx, "r", "alpha"); err != nil {
		t.Fatalf("releasing twice: %v", err)
	}
	if info := mustGet(t, s, "r"); info.Owner != "" || info.Status != store.StatusInterrupted {
		t.Fatalf("released run shows owner %q status %q, want none and interrupted", info.Owner, info.Status)
	}
	if err := s.Claim(ctx, "r", "beta", time.Hour); err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	// A run may be claimed before it exists, and the claim holds once it does.
	if err := s.Claim(ctx, "new", "gamma", time.Hour); err != nil {
		t.Fatalf("claiming a run before creating it: %v", err)
	}
	mustAppend(t, s, "new", 0, created(t, store.RunHeader{}))
	if info := mustGet(t, s, "new"); info.Owner != "gamma" || info.Status != store.StatusRunning {
		t.Fatalf("pre-claimed run shows owner %q status %q", info.Owner, info.Status)
	}
	wantError(t, "claiming a pre-claimed run", s.Claim(ctx, "new", "beta", time.Hour), store.ErrClaimed)
	// Claims are per run.
	if err := s.Claim(ctx, "other", "beta", time.Hour); err != nil {
		t.Fatalf("claiming a different run: %v", err)
	}
}

func testClaimExpiry(t *testing.T, newStore func(t *testing.T) store.Store) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		mustAppend(t, s, "r", 0, created(t, store.RunHeader{}))
		if err := s.Claim(ctx, "r", "alpha", time.Minute); err != nil {
			t.Fatal(err)
		}
		time.Sleep(59 * time.Second)
		wantError(t, "claim one second before the holder's lapses", s.Claim(ctx, "r", "beta", time.Minute), store.ErrClaimed)
		// Renewing pushes the expiry out again.
		if err := s.Claim(ctx, "r", "alpha", time.Minute); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		wantError(t, "claim within a renewed claim", s.Claim(ctx, "r", "beta", time.Minute), store.ErrClaimed)
		time.Sleep(31 * time.Second)
		if info := mustGet(t, s, "r"); info.Owner != "" || info.Status != store.StatusInterrupted {
			t.Fatalf("after the claim lapsed the run shows owner %q status %q, want none and interrupted", info.Owner, info.Status)
		}
		if runs, err := s.List(ctx, store.Filter{Status: store.StatusInterrupted}); err != nil || len(runs) != 1 || runs[0].Owner != "" {
			t.Fatalf("after the claim lapsed List of interrupted runs gives %+v, %v", runs, err)
		}
		if err := s.Claim(ctx, "r", "beta", time.Minute); err != nil {
			t.Fatalf("claim after the holder's claim lapsed: %v", err)
		}
		// The old holder lost it and cannot release the new one.
		wantError(t, "the lapsed holder releasing", s.Release(ctx, "r", "alpha"), store.ErrClaimed)
		wantError(t, "the lapsed holder reclaiming", s.Claim(ctx, "r", "alpha", time.Minute), store.ErrClaimed)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func testConcurrentClaims(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	mustAppend(t, s, "r", 0, created(t, store.RunHeader{}))
	for round := range 5 {
		const n = 6
		results := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { results[i] = s.Claim(ctx, "r", fmt.Sprintf("owner-%d-%d", round, i), time.Hour) })
		}
		wg.Wait()
		winner := ""
		for i, err := range results {
			switch {
			case err == nil:
				if winner != "" {
					t.Fatalf("round %d: both %s and owner-%d-%d got the claim", round, winner, round, i)
				}
				winner = fmt.Sprintf("owner-%d-%d", round, i)
			case !errors.Is(err, store.ErrClaimed):
				t.Fatalf("round %d: claim failed with %v, want success or ErrClaimed", round, err)
			}
		}
		if winner == "" {
			t.Fatalf("round %d: nobody got the claim", round)
		}
		if info := mustGet(t, s, "r"); info.Owner != winner {
			t.Fatalf("round %d: %s won but the run shows owner %q", round, winner, info.Owner)
		}
		if err := s.Release(ctx, "r", winner); err != nil {
			t.Fatal(err)
		}
	}
}

// testLongestClaim: a claim of the longest ttl a time.Duration holds (292
// years) is held, not lapsed by an overflow of the store's clock arithmetic.
func testLongestClaim(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	if err := s.Claim(ctx, "r", "alpha", time.Duration(math.MaxInt64)); err != nil {
		t.Fatalf("a claim of %v: %v", time.Duration(math.MaxInt64), err)
	}
	err := s.Claim(ctx, "r", "beta", time.Minute)
	wantError(t, "claiming over the longest claim", err, store.ErrClaimed)
	var ce *store.ClaimedError
	if !errors.As(err, &ce) || ce.Expires.Before(time.Now().AddDate(200, 0, 0)) {
		t.Fatalf("claim error %v, want one expiring centuries from now", err)
	}
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func testRunInfo(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	c := created(t, store.RunHeader{
		Model:          "claude-x",
		Prompt:         "  fix the failing test\nin package foo\nplease",
		ConversationID: "conv-1",
	})
	c.Time = t0
	last := mustAppend(t, s, "r", 0, c)
	for i := range 3 {
		last = mustAppend(t, s, "r", last,
			store.Record{Kind: store.KindModelTurn, Time: t0.Add(time.Duration(i+1) * time.Minute), Data: json.RawMessage(`{}`)},
			store.Record{Kind: store.KindToolIntent, Time: t0.Add(time.Duration(i+1)*time.Minute + time.Second)},
			store.Record{Kind: store.KindToolResult, Time: t0.Add(time.Duration(i+1)*time.Minute + 2*time.Second)})
	}
	if err := s.Claim(ctx, "r", "me", time.Hour); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, s, "r")
	want := store.RunInfo{
		ID: "r", Status: store.StatusRunning,
		Created: t0, Updated: t0.Add(3*time.Minute + 2*time.Second),
		LastSeq: 10, Turns: 3,
		Model: "claude-x", Prompt: "fix the failing test", ConversationID: "conv-1",
		Owner: "me",
	}
	if !infoEqual(got, want) {
		t.Fatalf("Get returned\n%+v\nwant\n%+v", got, want)
	}

	long := strings.Repeat("é", 300) // 600 bytes, two per rune
	mustAppend(t, s, "long", 0, created(t, store.RunHeader{Prompt: long}))
	p := mustGet(t, s, "long").Prompt
	if len(p) > store.MaxPromptSummary || !strings.HasPrefix(long, strings.TrimSuffix(p, "…")) || !strings.HasSuffix(p, "…") {
		t.Fatalf("a 600-byte prompt summarized as %q (%d bytes), want a prefix cut at a rune boundary with an ellipsis, at most %d bytes", p, len(p), store.MaxPromptSummary)
	}
	// A run_created without data is allowed and has an empty header.
	mustAppend(t, s, "bare", 0, store.Record{Kind: store.KindRunCreated})
	if info := mustGet(t, s, "bare"); info.Model != "" || info.Prompt != "" || info.Status != store.StatusInterrupted {
		t.Fatalf("bare run shows %+v", info)
	}
}

func infoEqual(a, b store.RunInfo) bool {
	return a.ID == b.ID && a.Status == b.Status && a.Created.Equal(b.Created) && a.Updated.Equal(b.Updated) &&
		a.LastSeq == b.LastSeq && a.Turns == b.Turns && a.Model == b.Model && a.Prompt == b.Prompt &&
		a.ConversationID == b.ConversationID && a.Error == b.Error && a.Owner == b.Owner
}

func testStatuses(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	last := mustAppend(t, s, "r", 0, created(t, store.RunHeader{}))
	if err := s.Claim(ctx, "r", "me", time.Hour); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		rec  store.Record
		want store.Status
	}{
		{rec(store.KindModelTurn, `{}`), store.StatusRunning},
		{rec(store.KindApprovalRequested, `{}`), store.StatusWaitingApproval},
		{rec(store.KindNote, `"still waiting"`), store.StatusWaitingApproval},
		{rec(store.KindApprovalDecided, `{}`), store.StatusRunning},
		{rec(store.KindResolution, `{}`), store.StatusRunning},
		{rec(store.KindRunFailed, `{"error":"model said no","code":3}`), store.StatusFailed},
		{rec(store.KindModelTurn, `{}`), store.StatusRunning}, // a failed run may be resumed
		{rec(store.KindRunFinished, `{}`), store.StatusDone},
	}
	for _, st := range steps {
		last = mustAppend(t, s, "r", last, st.rec)
		info := mustGet(t, s, "r")
		if info.Status != st.want {
			t.Fatalf("after %s the run is %q, want %q", st.rec.Kind, info.Status, st.want)
		}
		if st.rec.Kind == store.KindRunFailed && info.Error != "model said no" {
			t.Fatalf("failed run shows error %q, want the run_failed record's", info.Error)
		}
		if st.want != store.StatusFailed && info.Error != "" {
			t.Fatalf("%q run still shows error %q", info.Status, info.Error)
		}
	}
	// Without a claim only "running" changes: to interrupted.
	if err := s.Release(ctx, "r", "me"); err != nil {
		t.Fatal(err)
	}
	if info := mustGet(t, s, "r"); info.Status != store.StatusDone {
		t.Fatalf("unclaimed finished run is %q", info.Status)
	}
	wait := mustAppend(t, s, "w", 0, created(t, store.RunHeader{}))
	mustAppend(t, s, "w", wait, rec(store.KindApprovalRequested, `{}`))
	if info := mustGet(t, s, "w"); info.Status != store.StatusWaitingApproval {
		t.Fatalf("unclaimed run waiting for approval is %q", info.Status)
	}
	// run_failed data need not be an object.
	f := mustAppend(t, s, "f", 0, created(t, store.RunHeader{}))
	mustAppend(t, s, "f", f, rec(store.KindRunFailed, `"disk full"`))
	if info := mustGet(t, s, "f"); info.Status != store.StatusFailed || info.Error != "" {
		t.Fatalf("run failed with non-object data shows %q %q", info.Status, info.Error)
	}
}

func testList(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	if runs, err := s.List(ctx, store.Filter{}); err != nil || len(runs) != 0 {
		t.Fatalf("empty store lists %v, %v", runs, err)
	}
	// Created out of order; equal times order by id.
	newRun := func(id string, minute int, conv string, final store.Kind) {
		c := created(t, store.RunHeader{ConversationID: conv, Prompt: id})
		c.Time = t0.Add(time.Duration(minute) * time.Minute)
		last := mustAppend(t, s, id, 0, c)
		if final != "" {
			mustAppend(t, s, id, last, store.Record{Kind: final, Time: c.Time.Add(time.Second)})
		}
	}
	newRun("b", 2, "c1", store.KindRunFinished)
	newRun("a", 1, "c1", "")
	newRun("d", 4, "c2", store.KindApprovalRequested)
	newRun("c", 3, "", store.KindRunFailed)
	newRun("e", 4, "c1", store.KindModelTurn)
	if err := s.Claim(ctx, "e", "me", time.Hour); err != nil {
		t.Fatal(err)
	}
	ids := func(f store.Filter) string {
		t.Helper()
		runs, err := s.List(ctx, f)
		if err != nil {
			t.Fatalf("List(%+v): %v", f, err)
		}
		var b []string
		for _, r := range runs {
			if r.Prompt != r.ID {
				t.Fatalf("List returned run %q with another run's summary (prompt %q)", r.ID, r.Prompt)
			}
			b = append(b, r.ID+"="+string(r.Status))
		}
		return strings.Join(b, " ")
	}
	for _, c := range []struct {
		f    store.Filter
		want string
	}{
		{store.Filter{}, "e=running d=waiting_approval c=failed b=done a=interrupted"},
		{store.Filter{Limit: 2}, "e=running d=waiting_approval"},
		{store.Filter{Limit: 10}, "e=running d=waiting_approval c=failed b=done a=interrupted"},
		{store.Filter{ConversationID: "c1"}, "e=running b=done a=interrupted"},
		{store.Filter{ConversationID: "c1", Limit: 1}, "e=running"},
		{store.Filter{Status: store.StatusInterrupted}, "a=interrupted"},
		{store.Filter{Status: store.StatusRunning}, "e=running"},
		{store.Filter{Status: store.StatusDone, ConversationID: "c2"}, ""},
		{store.Filter{ConversationID: "nope"}, ""},
	} {
		if got := ids(c.f); got != c.want {
			t.Errorf("List(%+v) = %q, want %q", c.f, got, c.want)
		}
	}
	if err := s.Release(ctx, "e", "me"); err != nil {
		t.Fatal(err)
	}
	if got := ids(store.Filter{Status: store.StatusInterrupted}); got != "e=interrupted a=interrupted" {
		t.Errorf("after release, interrupted runs are %q", got)
	}
}

func testConversations(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	if h, err := s.History(ctx, "c"); err != nil || len(h) != 0 {
		t.Fatalf("unknown conversation: History = %v, %v; want none and no error", h, err)
	}
	run1 := []llm.Message{
		llm.UserText("list the files"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			llm.Thinking{Text: "use ls", Signature: "sig"},
			llm.ToolCall{ID: "c1", Name: "bash", Arguments: `{"cmd":"ls"}`},
		}},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "c1", Name: "bash", Content: "a.go\nb.go"}}},
		llm.AssistantText("two files"),
	}
	run2 := []llm.Message{llm.UserText("and now?"), {Role: llm.RoleAssistant, Parts: []llm.Part{
		llm.Text{Text: "still two"}, llm.Image{Data: []byte{0, 1, 2, 255}, MediaType: "image/png"},
	}}}
	if err := s.AppendConversation(ctx, "c", "run1", run1); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendConversation(ctx, "other", "run9", []llm.Message{llm.UserText("elsewhere")}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendConversation(ctx, "c", "run2", run2); err != nil {
		t.Fatal(err)
	}
	// A repeat with the same messages (a driver resuming after a crash) does nothing.
	if err := s.AppendConversation(ctx, "c", "run1", run1); err != nil {
		t.Fatalf("repeating run1's append: %v", err)
	}
	// A repeat with other messages is refused.
	changed := append([]llm.Message{}, run1[:3]...)
	err := s.AppendConversation(ctx, "c", "run1", changed)
	wantError(t, "appending different messages for run1 again", err, store.ErrConflict)
	got, err := s.History(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]llm.Message{}, run1...), run2...)
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Fatalf("History =\n%s\nwant\n%s", g, w)
	}
	// The caller owns what History returns.
	got[0].Parts[0] = llm.Text{Text: "mutated"}
	again, err := s.History(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Text() != "list the files" {
		t.Fatalf("History shares storage with the caller: first message is now %q", again[0].Text())
	}
	other, err := s.History(ctx, "other")
	if err != nil || len(other) != 1 || other[0].Text() != "elsewhere" {
		t.Fatalf("conversation other: %v, %v", other, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func testNotFound(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	mustAppend(t, s, "exists", 0, created(t, store.RunHeader{}))
	_, err := s.Load(ctx, "missing", 0)
	wantError(t, "Load of a missing run", err, store.ErrNotFound)
	if !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("not-found error %q does not name the run", err)
	}
	_, err = s.Get(ctx, "missing")
	wantError(t, "Get of a missing run", err, store.ErrNotFound)
	_, err = s.Append(ctx, "missing", 1, rec(store.KindNote, ""))
	wantError(t, "Append to a missing run", err, store.ErrNotFound)
}

func testClosed(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	last := mustAppend(t, s, "r", 0, created(t, store.RunHeader{}))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	msgs := []llm.Message{llm.UserText("x")}
	calls := map[string]func() error{
		"Append":             func() error { _, err := s.Append(ctx, "r", last, rec(store.KindNote, "")); return err },
		"Append new":         func() error { _, err := s.Append(ctx, "n", 0, created(t, store.RunHeader{})); return err },
		"Load":               func() error { _, err := s.Load(ctx, "r", 0); return err },
		"Get":                func() error { _, err := s.Get(ctx, "r"); return err },
		"List":               func() error { _, err := s.List(ctx, store.Filter{}); return err },
		"Claim":              func() error { return s.Claim(ctx, "r", "me", time.Minute) },
		"Release":            func() error { return s.Release(ctx, "r", "me") },
		"History":            func() error { _, err := s.History(ctx, "c"); return err },
		"AppendConversation": func() error { return s.AppendConversation(ctx, "c", "r", msgs) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: error %v, want one matching store.ErrClosed", name, err)
		}
	}
}

func testCancelledContext(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	last := mustAppend(t, s, "r", 0, created(t, store.RunHeader{}))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	msgs := []llm.Message{llm.UserText("x")}
	calls := map[string]func() error{
		"Append":             func() error { _, err := s.Append(cctx, "r", last, rec(store.KindNote, "")); return err },
		"Load":               func() error { _, err := s.Load(cctx, "r", 0); return err },
		"Get":                func() error { _, err := s.Get(cctx, "r"); return err },
		"List":               func() error { _, err := s.List(cctx, store.Filter{}); return err },
		"Claim":              func() error { return s.Claim(cctx, "r", "me", time.Minute) },
		"Release":            func() error { return s.Release(cctx, "r", "me") },
		"History":            func() error { _, err := s.History(cctx, "c"); return err },
		"AppendConversation": func() error { return s.AppendConversation(cctx, "c", "r", msgs) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: error %v, want one matching context.Canceled", name, err)
		}
	}
	if info := mustGet(t, s, "r"); info.LastSeq != last || info.Owner != "" {
		t.Fatalf("calls with a cancelled context took effect: %+v", info)
	}
	if h, err := s.History(ctx, "c"); err != nil || len(h) != 0 {
		t.Fatalf("a cancelled AppendConversation stored messages: %v %v", h, err)
	}
}

// testMeta: a run's header Meta comes back from Get and List as given,
// unchanged by later records; "null" is none; an oversized one is refused
// with nothing written.
func testMeta(t *testing.T, newStore func(t *testing.T) store.Store) {
	s := newStore(t)
	meta := `{"model":"openai:x","labels":["a","b"],"n":1.5,"s":"\u00e9 \"q\""}`
	last := mustAppend(t, s, "r", 0, created(t, store.RunHeader{Model: "m", Meta: json.RawMessage(meta)}))
	mustAppend(t, s, "r", last, rec(store.KindModelTurn, `{}`), rec(store.KindRunFinished, `{}`))
	mustAppend(t, s, "plain", 0, created(t, store.RunHeader{}))
	mustAppend(t, s, "null", 0, created(t, store.RunHeader{Meta: json.RawMessage(`null`)}))
	info, err := s.Get(ctx, "r")
	if err != nil || info.Meta != meta {
		t.Fatalf("Get: meta %q (%v), want %q", info.Meta, err, meta)
	}
	list, err := s.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, i := range list {
		got[i.ID] = i.Meta
	}
	if got["r"] != meta || got["plain"] != "" || got["null"] != "" || len(got) != 3 {
		t.Fatalf("List metas: %q", got)
	}
	big := json.RawMessage(`"` + strings.Repeat("x", store.MaxMeta) + `"`)
	_, err = s.Append(ctx, "big", 0, created(t, store.RunHeader{Meta: big}))
	wantError(t, "an oversized meta", err, store.ErrInvalid)
	if _, err := s.Get(ctx, "big"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused run exists: %v", err)
	}
}
