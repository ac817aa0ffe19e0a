package postgres

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/loomkit/loom/store/storetest"
)

// syncModes: the shipped setting (each commit waits for the server's WAL
// flush), and synchronous_commit=off to show the cost without the flush,
// which varies with the disk far more than with the journal.
var syncModes = []struct{ name, commit string }{
	{"sync=on", ""},
	{"sync=off", "off"},
}

func benchStore(b *testing.B, commit string) *Store {
	u := serverURL(b)
	if commit != "" {
		pu, err := url.Parse(u)
		if err != nil {
			b.Fatal(err)
		}
		q := pu.Query()
		q.Set("synchronous_commit", commit)
		pu.RawQuery = q.Encode()
		u = pu.String()
	}
	s, err := Open(ctx, u, &Options{Schema: newSchema(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// Per-append cost at 10 and at 1,000 records of history: the ratio of the
// two ns/op is the growth with run length. Compare with store/sqlite's
// BenchmarkAppend.
func BenchmarkAppend(b *testing.B) {
	for _, mode := range syncModes {
		for _, history := range []int{10, 1000} {
			b.Run(fmt.Sprintf("%s/history=%d", mode.name, history), func(b *testing.B) {
				s := benchStore(b, mode.commit)
				storetest.BenchmarkAppend(b, s, history, func() {
					if _, err := s.pool.Exec(ctx, `CHECKPOINT`); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}

// Loading a 1,000-record journal: the store's share of resuming a run.
func BenchmarkLoad1000(b *testing.B) {
	storetest.BenchmarkLoad(b, benchStore(b, ""), 1000)
}
