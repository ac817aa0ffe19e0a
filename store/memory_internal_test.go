package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A journal holding a record of a future version (as if written by a newer
// loom into a shared backend) is refused on Load, naming the record.
func TestMemoryLoadRefusesUnknownVersions(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		mutate func(*Record)
		want   string
	}{
		{"version", func(r *Record) { r.Version = 2 }, "format version 2"},
		{"kind", func(r *Record) { r.Kind = "tool_progress" }, `kind "tool_progress"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := NewMemory()
			if _, err := m.Append(ctx, "r", 0, Record{Kind: KindRunCreated}, Record{Kind: KindNote}); err != nil {
				t.Fatal(err)
			}
			c.mutate(m.runs["r"].record(2))
			_, err := m.Load(ctx, "r", 0)
			var ve *VersionError
			if !errors.As(err, &ve) || !errors.Is(err, ErrVersion) || ve.Seq != 2 {
				t.Fatalf("Load error %v, want a *VersionError for record 2", err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "upgrade") {
				t.Fatalf("error %q does not say %q and what to do", err, c.want)
			}
			// Records before the unknown one still load.
			if recs, err := m.Load(ctx, "r", 2); err != nil || len(recs) != 0 {
				t.Fatalf("Load after 2: %v %v", recs, err)
			}
		})
	}
}
