package postgres

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/loomkit/loom/store"
)

func TestBlobs(t *testing.T) {
	schema := newSchema(t)
	s := openSchema(t, schema, nil)
	b := s.Blobs()
	data := []byte("the system prompt, stored once")
	key := blobKey(data)
	if _, err := b.Get(ctx, key); !errors.Is(err, ErrBlobNotFound) || !strings.Contains(err.Error(), key) {
		t.Fatalf("Get of a missing blob: %v, want ErrBlobNotFound naming the key", err)
	}
	for range 2 { // Put of a key already there does nothing
		if err := b.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.Get(ctx, key)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v; want %q", got, err, data)
	}
	got[0] = 'X'
	if again, _ := b.Get(ctx, key); !bytes.Equal(again, data) {
		t.Fatalf("Get shares memory with its caller: %q", again)
	}
	// The empty blob is a blob.
	if err := b.Put(ctx, blobKey(nil), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, blobKey(nil)); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("the empty blob: %q (nil %v), %v", got, got == nil, err)
	}

	// Keys are checked: malformed ones, and a key that is not the data's.
	for _, bad := range []string{"", "sha256-", "sha256-" + strings.Repeat("A", 64), "md5-" + strings.Repeat("a", 64),
		"sha256-" + strings.Repeat("a", 63), "sha256-" + strings.Repeat("a", 64) + "/", "../../etc/passwd"} {
		if err := b.Put(ctx, bad, data); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Put(%q): %v, want ErrInvalid", bad, err)
		}
		if _, err := b.Get(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Get(%q): %v, want ErrInvalid", bad, err)
		}
	}
	other := []byte("other")
	if err := b.Put(ctx, key, other); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), blobKey(other)) {
		t.Fatalf("Put of data under another data's key: %v, want ErrInvalid naming the right key", err)
	}
	if err := b.Put(ctx, blobKey(other), other); err != nil {
		t.Fatal(err)
	}

	// A damaged row reads as missing, never as wrong content.
	db := admin(t)
	run(t, db, schema, `UPDATE {s}.blobs SET data = 'tampered' WHERE key = $1`, key)
	if _, err := b.Get(ctx, key); !errors.Is(err, ErrBlobNotFound) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Get of a damaged blob: %v, want ErrBlobNotFound saying it is damaged", err)
	}
	// An oversized row is not read into memory.
	run(t, db, schema, `UPDATE {s}.blobs SET data = decode(repeat('00', $2::int), 'hex') WHERE key = $1`, blobKey(other), MaxBlobSize+1)
	if _, err := b.Get(ctx, blobKey(other)); !errors.Is(err, ErrBlobNotFound) || !strings.Contains(err.Error(), fmt.Sprint(MaxBlobSize+1)) {
		t.Fatalf("Get of an oversized blob: %v, want ErrBlobNotFound naming its size", err)
	}
}

func TestBlobSizeIsBounded(t *testing.T) {
	b := openTest(t, nil).Blobs()
	big := make([]byte, MaxBlobSize+1)
	if err := b.Put(ctx, blobKey(big), big); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("Put of %d bytes: %v, want ErrInvalid naming the limit", len(big), err)
	}
	if _, err := b.Get(ctx, blobKey(big)); !errors.Is(err, ErrBlobNotFound) {
		t.Fatalf("the refused blob: %v, want ErrBlobNotFound", err)
	}
}

// Many writers putting the same blobs at once, from two pools: every Put
// succeeds and each blob is there once, whole.
func TestConcurrentPuts(t *testing.T) {
	schema := newSchema(t)
	pools := []*Blobs{openSchema(t, schema, nil).Blobs(), openSchema(t, schema, nil).Blobs()}
	const blobs = 20
	var wg sync.WaitGroup
	errs := make(chan error, 8*blobs)
	for w := range 8 {
		wg.Go(func() {
			for i := range blobs {
				data := blobData((i + w) % blobs)
				if err := pools[w%2].Put(ctx, blobKey(data), data); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range blobs {
		data := blobData(i)
		if got, err := pools[i%2].Get(ctx, blobKey(data)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("blob %d: %d bytes, %v", i, len(got), err)
		}
	}
	var n int
	if err := admin(t).QueryRow(ctx, `SELECT count(*) FROM `+schema+`.blobs`).Scan(&n); err != nil || n != blobs {
		t.Fatalf("%d blob rows (%v), want %d", n, err, blobs)
	}
}

// Two workers on separate processes, each with its own pool, share the
// blob store: what one puts the other gets, while both put at once.
func TestTwoProcessesShareBlobs(t *testing.T) {
	schema := newSchema(t)
	s := openSchema(t, schema, nil)
	const n = 30
	putters := []*child{startChild(t, "blobs", schema, fmt.Sprint(n)), startChild(t, "blobs", schema, fmt.Sprint(n))}
	for _, c := range putters {
		if l := c.next(t); l != "ready" {
			t.Fatalf("child said %q\n%s", l, c.errb)
		}
	}
	getter := startChild(t, "get", schema, "")
	for i := range n {
		want := blobKey(blobData(i))
		for _, c := range putters {
			if l := c.next(t); l != "put "+want {
				t.Fatalf("putter said %q, want put %s", l, want)
			}
		}
		// Another process gets what the putters put.
		fmt.Fprintln(getter.stdin, want)
		if l := getter.next(t); l != fmt.Sprintf("got %d", len(blobData(i))) {
			t.Fatalf("getter said %q for blob %d", l, i)
		}
	}
	// And the parent, on a third pool, gets what the parent puts to the
	// getter.
	mine := []byte("put by the parent")
	if err := s.Blobs().Put(ctx, blobKey(mine), mine); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(getter.stdin, blobKey(mine))
	fmt.Fprintln(getter.stdin, blobKey([]byte("never put")))
	if l := getter.next(t); l != fmt.Sprintf("got %d", len(mine)) {
		t.Fatalf("getter said %q for the parent's blob", l)
	}
	if l := getter.next(t); !strings.HasPrefix(l, "error ") || !strings.Contains(l, "not found") {
		t.Fatalf("getter said %q for a blob nobody put", l)
	}
}
