package postgres

import (
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomkit/loom/store"
)

// Claims are judged by the server's clock, so a client whose clock is far
// off neither loses its claims early nor holds them late. Inside a synctest
// bubble the process's clock reads 2000-01-01 and moves only when the
// bubble sleeps: a client 26 years behind the server, whose clock jumps at
// will. If the store judged claims by the client's clock, its one-hour
// claim would have lapsed long ago for a client with the right time.
func TestClaimsUseTheServerClock(t *testing.T) {
	schema := newSchema(t)
	right := openSchema(t, schema, nil)
	if _, err := right.Append(ctx, "r", 0, created(t, store.RunHeader{})); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		behind := openSchema(t, schema, nil)
		if now := time.Now(); now.Year() != 2000 {
			t.Fatalf("the bubble's clock reads %v, want a time in 2000", now)
		}
		if err := behind.Claim(ctx, "r", "behind", time.Hour); err != nil {
			t.Fatal(err)
		}
		// The client's clock jumps two hours on; the server's does not.
		time.Sleep(2 * time.Hour)
		if info, err := behind.Get(ctx, "r"); err != nil || info.Owner != "behind" {
			t.Fatalf("after the client's clock jumped past the ttl: %+v, %v; want the claim still held", info, err)
		}
		if err := behind.Close(); err != nil {
			t.Fatal(err)
		}
	})
	// The client with the right time sees the claim live, and its expiry
	// an hour from now by the server's clock, not in the year 2000.
	if info, err := right.Get(ctx, "r"); err != nil || info.Owner != "behind" || info.Status != store.StatusRunning {
		t.Fatalf("a client with the right time sees %+v, %v; want owner behind, running", info, err)
	}
	err := right.Claim(ctx, "r", "right", time.Minute)
	var ce *store.ClaimedError
	if !errors.As(err, &ce) || ce.Owner != "behind" {
		t.Fatalf("claiming a live claim of a client whose clock is behind: %v, want a *ClaimedError naming behind", err)
	}
	if left := time.Until(ce.Expires); left < 50*time.Minute || left > 61*time.Minute {
		t.Fatalf("the claim expires at %v, %v from now; want about an hour from now by the server's clock", ce.Expires, left)
	}
	if runs, err := right.List(ctx, store.Filter{Status: store.StatusRunning}); err != nil || len(runs) != 1 || runs[0].Owner != "behind" {
		t.Fatalf("List of running runs: %+v, %v", runs, err)
	}
}

// A claim lapses when its ttl has passed on the server's clock: a second
// owner is refused at first and gets the run once the ttl is over.
func TestClaimLapsesOnTheServerClock(t *testing.T) {
	s := openTest(t, nil)
	const ttl = 300 * time.Millisecond
	start := time.Now()
	if err := s.Claim(ctx, "r", "alpha", ttl); err != nil {
		t.Fatal(err)
	}
	err := s.Claim(ctx, "r", "beta", time.Minute)
	var ce *store.ClaimedError
	if time.Since(start) < ttl && !errors.As(err, &ce) {
		t.Fatalf("a second owner within the ttl: %v, want a *ClaimedError", err)
	}
	for err != nil {
		if !errors.Is(err, store.ErrClaimed) {
			t.Fatal(err)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("a %v claim still holds after 30 s", ttl)
		}
		time.Sleep(50 * time.Millisecond)
		err = s.Claim(ctx, "r", "beta", time.Minute)
	}
	if waited := time.Since(start); waited < ttl {
		t.Fatalf("a %v claim lapsed after %v", ttl, waited)
	}
	if err := s.Release(ctx, "r", "alpha"); !errors.Is(err, store.ErrClaimed) {
		t.Fatalf("the lapsed holder releasing the new claim: %v, want ErrClaimed", err)
	}
}

// A claim of the longest ttl there is holds, and ends in the far future,
// not in an overflow.
func TestLongestClaim(t *testing.T) {
	s := openTest(t, nil)
	if err := s.Claim(ctx, "r", "alpha", time.Duration(math.MaxInt64)); err != nil {
		t.Fatalf("a claim of %v: %v", time.Duration(math.MaxInt64), err)
	}
	err := s.Claim(ctx, "r", "beta", time.Minute)
	var ce *store.ClaimedError
	if !errors.As(err, &ce) || ce.Expires.Before(time.Now().AddDate(200, 0, 0)) {
		t.Fatalf("claiming over the longest claim: %v, want a *ClaimedError expiring centuries from now", err)
	}
	if err := s.Claim(ctx, "tiny", "alpha", time.Nanosecond); err != nil {
		t.Fatalf("a claim of 1ns: %v", err)
	}
}
