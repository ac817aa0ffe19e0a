package agent_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/store"
)

// FuzzResume feeds arbitrary journals to Resume: a journal that does not
// replay is refused with an error, one that does is driven to its end;
// nothing panics or hangs, and a completed run's history is valid.
func FuzzResume(f *testing.F) {
	// Seeds: the harness run's journal cut at every record.
	mem := store.NewMemory()
	counter := filepath.Join(f.TempDir(), "counter")
	if _, err := harnessAgent(mem, harnessModel(""), counter, "", "w", 0).Run(context.Background(), agent.Prompt("go")); err != nil {
		f.Fatal(err)
	}
	recs, err := mem.Load(context.Background(), harnessRunID, 0)
	if err != nil {
		f.Fatal(err)
	}
	for n := 1; n <= len(recs); n++ {
		var b bytes.Buffer
		if err := store.WriteJournal(&b, recs[:n]); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := store.ReadJournal(bytes.NewReader(data))
		if err != nil || len(recs) == 0 {
			return
		}
		mem := store.NewMemory()
		for i := range recs {
			recs[i].Time = time.Time{}
		}
		if _, err := mem.Append(context.Background(), harnessRunID, 0, recs...); err != nil {
			return
		}
		counter := filepath.Join(t.TempDir(), "counter")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := harnessAgent(mem, harnessModel(""), counter, "", "w", 0).Resume(ctx, agent.Resumption{RunID: harnessRunID})
		if err != nil {
			return
		}
		if err := llm.CheckHistory(res.Messages); err != nil {
			t.Fatalf("a resumed run completed with an invalid history: %v", err)
		}
		for key, n := range effects(t, counter) {
			if n > 1 {
				t.Fatalf("call %s took effect %d times", key, n)
			}
		}
	})
}
