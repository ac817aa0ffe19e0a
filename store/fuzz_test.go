package store_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/loomkit/loom/store"
)

// FuzzReadJournal: any input either is refused with a typed error or reads
// as a journal that a store accepts and that writes back to an input
// ReadJournal reads the same.
func FuzzReadJournal(f *testing.F) {
	files, _ := filepath.Glob("testdata/format1/*.jsonl")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"seq":1,"kind":"run_created","version":1,"time":"2026-03-01T10:00:00Z","data":null}`))
	f.Add([]byte(`{"seq":1,"kind":"run_created","version":2,"time":"2026-03-01T10:00:00Z"}`))
	f.Add([]byte("{\"seq\":1,\"kind\":\"run_created\",\"version\":1,\"time\":\"2026-03-01T10:00:00Z\",\"data\":{\"model\":1}}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		recs, err := store.ReadJournal(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrVersion) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		var out bytes.Buffer
		if err := store.WriteJournal(&out, recs); err != nil {
			t.Fatal(err)
		}
		again, err := store.ReadJournal(&out)
		if err != nil {
			t.Fatalf("a journal written back does not read: %v\n%s", err, out.String())
		}
		if len(again) != len(recs) {
			t.Fatalf("%d records read back as %d", len(recs), len(again))
		}
		if len(recs) == 0 {
			return
		}
		// A store takes the journal or refuses it with a typed error.
		s := store.NewMemory()
		_, err = s.Append(context.Background(), "r", 0, recs...)
		if err != nil && !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("store refused a read journal with an untyped error: %v", err)
		}
	})
}
