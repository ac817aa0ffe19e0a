package sqlite

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/store"
)

// stepClock stands in for the wall clock jumping by d as seen by the
// other process: claims are stored as wall-clock expiry times, so moving
// every expiry back by d is what a forward step of d looks like to them.
func stepClock(t *testing.T, s *Store, d time.Duration) {
	t.Helper()
	if _, err := s.db.ExecContext(ctx, `UPDATE claims SET expires = expires - ?`, d.Nanoseconds()); err != nil {
		t.Fatal(err)
	}
}

// ADVERSARIAL 78 (the store's part) and 76: a wall-clock step ends a claim
// early, so a second process takes over a run whose first driver is still
// at work. The sequence check keeps them from interleaving: the first
// driver's next step is refused with a conflict, and the journal holds
// each step once, in order.
func TestClockStepEndsAClaimEarly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	a, b := mustOpen(t, path), mustOpen(t, path)
	if err := a.Claim(ctx, "r", "alpha", time.Hour); err != nil {
		t.Fatal(err)
	}
	seqA, err := a.Append(ctx, "r", 0, created(t, store.RunHeader{}), note(`"alpha 1"`))
	if err != nil {
		t.Fatal(err)
	}
	// Before the step the claim holds.
	var ce *store.ClaimedError
	if err := b.Claim(ctx, "r", "beta", time.Hour); !errors.As(err, &ce) || ce.Owner != "alpha" {
		t.Fatalf("beta claiming a live claim: %v, want a *ClaimedError naming alpha", err)
	}
	stepClock(t, b, 2*time.Hour)
	if err := b.Claim(ctx, "r", "beta", time.Hour); err != nil {
		t.Fatalf("beta claiming after the clock step: %v", err)
	}
	info, err := b.Get(ctx, "r")
	if err != nil || info.Owner != "beta" {
		t.Fatalf("after the takeover: %+v, %v; want owner beta", info, err)
	}
	seqB, err := b.Append(ctx, "r", info.LastSeq, note(`"beta 2"`))
	if err != nil {
		t.Fatal(err)
	}
	// alpha does not know: its next step is refused, and says why.
	_, err = a.Append(ctx, "r", seqA, note(`"alpha 2"`))
	var conflict *store.ConflictError
	if !errors.As(err, &conflict) || conflict.Expected != seqA || conflict.Actual != seqB {
		t.Fatalf("alpha appending after the takeover: %v, want a *ConflictError (expected %d, actual %d)", err, seqA, seqB)
	}
	// Renewing tells alpha it lost the run.
	if err := a.Claim(ctx, "r", "alpha", time.Hour); !errors.As(err, &ce) || ce.Owner != "beta" {
		t.Fatalf("alpha renewing: %v, want a *ClaimedError naming beta", err)
	}
	recs, err := a.Load(ctx, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Kind)+" "+string(r.Data))
	}
	if len(recs) != 3 || recs[1].Seq != 2 || recs[2].Seq != 3 || string(recs[1].Data) != `"alpha 1"` || string(recs[2].Data) != `"beta 2"` {
		t.Fatalf("journal after the takeover:\n%s\nwant run_created, alpha 1, beta 2", strings.Join(got, "\n"))
	}
}
