package sqlite

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/store"
)

// checkIntact checks that the database passes integrity_check and that run
// runID's journal runs 1..want densely.
func checkIntact(t *testing.T, s *Store, runID string, want int64) []store.Record {
	t.Helper()
	if got := pragma(t, s, "integrity_check"); got != "ok" {
		t.Fatalf("integrity_check: %s", got)
	}
	recs, err := s.Load(ctx, runID, 0)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if int64(len(recs)) != want {
		t.Fatalf("journal has %d records, want %d", len(recs), want)
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
	info, err := s.Get(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	if info.LastSeq != want {
		t.Fatalf("run info says the journal ends at %d, want %d", info.LastSeq, want)
	}
	return recs
}

// A full disk (simulated by a page limit) fails the append with an explicit
// error, saves nothing of it, and leaves the database usable once there is
// room again. ADVERSARIAL 77.
func TestDiskFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	s := mustOpen(t, path)
	last, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{}))
	if err != nil {
		t.Fatal(err)
	}
	var pages int64
	if err := s.db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	s.Close()

	limited := openWith(t, path, url.Values{"_pragma": {fmt.Sprintf("max_page_count(%d)", pages+40)}})
	payload := []byte(`"` + strings.Repeat("x", 48<<10) + `"`)
	var appendErr error
	saved := last
	for range 100 {
		n, err := limited.Append(ctx, "r", saved, store.Record{Kind: store.KindToolResult, Data: payload},
			store.Record{Kind: store.KindNote, Data: []byte(`"pair"`)})
		if err != nil {
			appendErr = err
			break
		}
		saved = n
	}
	if appendErr == nil {
		t.Fatal("100 appends of 48 KiB fit in a 40-page allowance; the limit did not apply")
	}
	var se *msqlite.Error
	if !errors.As(appendErr, &se) || se.Code()&0xff != sqlite3.SQLITE_FULL {
		t.Fatalf("append on a full database: %v (%T), want the SQLite full error wrapped", appendErr, appendErr)
	}
	msg := appendErr.Error()
	for _, want := range []string{`run "r"`, "nothing of this write was saved", "full"} {
		if !strings.Contains(msg, want) {
			t.Errorf("disk-full error %q does not say %q", msg, want)
		}
	}
	t.Logf("disk full: %v", appendErr)
	if errors.Is(appendErr, store.ErrConflict) || errors.Is(appendErr, store.ErrInvalid) {
		t.Errorf("disk-full error %q matches a store sentinel it should not", msg)
	}
	// Nothing of the failed batch is visible, through this handle or a fresh one.
	checkIntact(t, limited, "r", saved)
	limited.Close()
	s = mustOpen(t, path)
	recs := checkIntact(t, s, "r", saved)
	if recs[len(recs)-1].Kind != store.KindRunCreated && string(recs[len(recs)-1].Data) != `"pair"` {
		t.Fatalf("the journal ends inside a batch: last record %s %s", recs[len(recs)-1].Kind, recs[len(recs)-1].Data)
	}
	// With room again, appending continues where the saved journal ends.
	if _, err := s.Append(ctx, "r", saved, note(`"after"`)); err != nil {
		t.Fatalf("append once there is room: %v", err)
	}
}

// A database that cannot be written (a read-only connection, as on a
// read-only file system) fails every write explicitly and reports nothing
// saved. ADVERSARIAL 77.
func TestReadOnlyDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	s := mustOpen(t, path)
	last, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{}))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	ro := openWith(t, path, url.Values{"mode": {"ro"}})
	_, err = ro.Append(ctx, "r", last, note(`1`))
	var se *msqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_READONLY {
		t.Fatalf("append to a read-only database: %v, want the SQLite read-only error wrapped", err)
	}
	if !strings.Contains(err.Error(), "permissions") || !strings.Contains(err.Error(), "nothing of this write was saved") {
		t.Errorf("read-only error %q does not say what happened and what to do", err)
	}
	for name, err := range map[string]error{
		"Claim":              ro.Claim(ctx, "r", "me", 60e9),
		"AppendConversation": ro.AppendConversation(ctx, "c", "r", []llm.Message{llm.UserText("x")}),
	} {
		if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_READONLY {
			t.Errorf("%s on a read-only database: %v", name, err)
		}
	}
	// Reads still work and show nothing new.
	checkIntact(t, ro, "r", last)
}

// The same through file permissions, where the test is not run as root
// (root writes through them).
func TestReadOnlyFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root, which ignores file permissions; TestReadOnlyDatabase covers the read-only case")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "loom.db")
	s := mustOpen(t, path)
	last, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{}))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		os.Chmod(p, 0o400)
	}
	t.Cleanup(func() {
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			os.Chmod(p, 0o600)
		}
	})
	ro, err := Open(path, nil)
	if err != nil {
		// Refusing to open is an explicit failure too.
		if !strings.Contains(err.Error(), path) {
			t.Fatalf("open of a read-only file: %v, want an error naming it", err)
		}
		return
	}
	defer ro.Close()
	if _, err := ro.Append(ctx, "r", last, note(`1`)); err == nil {
		t.Fatal("append to a read-only file succeeded")
	}
}

// A writer that cannot get the database within the busy timeout fails with
// an error saying so, and saves nothing; it does not hang.
func TestBusyTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	holder := mustOpen(t, path)
	last, err := holder.Append(ctx, "r", 0, created(t, store.RunHeader{}))
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := Open(path, &Options{BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()

	// Another connection holds the write lock, as another process would.
	conn, err := holder.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	_, err = waiter.Append(ctx, "r", last, note(`"blocked"`))
	var se *msqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || !strings.Contains(err.Error(), "busy timeout") {
		t.Fatalf("append while another connection holds the lock: %v, want a busy error that says so", err)
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	checkIntact(t, waiter, "r", last)
	if _, err := waiter.Append(ctx, "r", last, note(`"free"`)); err != nil {
		t.Fatalf("append once the lock is free: %v", err)
	}
}

// A writer queued behind another in the same process gives up when its
// context ends.
func TestQueuedWriterHonoursContext(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		s := mustOpen(t, filepath.Join(dir, "loom.db"))
		last, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{}))
		if err != nil {
			t.Fatal(err)
		}
		s.writing <- struct{}{} // another writer is in the middle of a write
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := s.Append(cctx, "r", last, note(`"queued"`))
			done <- err
		}()
		synctest.Wait() // the append is queued
		select {
		case err := <-done:
			t.Fatalf("append returned while another writer held the store: %v", err)
		default:
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("queued append after cancel: %v, want context.Canceled", err)
		}
		<-s.writing
		checkIntact(t, s, "r", last)
		s.Close()
	})
}
