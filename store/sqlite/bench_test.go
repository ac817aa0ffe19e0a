package sqlite

import (
	"fmt"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/loomkit/loom/store/storetest"
)

func benchStore(b *testing.B, extra url.Values) *Store {
	s, err := open(filepath.Join(b.TempDir(), "loom.db"), nil, extra)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// syncModes: the shipped setting, and without fsync to show the CPU cost
// alone (fsync time varies with the disk far more than with the journal).
var syncModes = []struct {
	name  string
	extra url.Values
}{
	{"sync=full", nil},
	{"sync=off", url.Values{"_pragma": {"synchronous(OFF)"}}},
}

// Per-append cost at 10 and at 1,000 records of history: the ratio of the
// two ns/op is the growth with run length (target at most 1.5).
func BenchmarkAppend(b *testing.B) {
	for _, mode := range syncModes {
		for _, history := range []int{10, 1000} {
			b.Run(fmt.Sprintf("%s/history=%d", mode.name, history), func(b *testing.B) {
				s := benchStore(b, mode.extra)
				storetest.BenchmarkAppend(b, s, history, func() {
					if _, err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}

// Loading a 1,000-record journal: the store's share of resuming a run.
func BenchmarkLoad1000(b *testing.B) {
	storetest.BenchmarkLoad(b, benchStore(b, nil), 1000)
}
