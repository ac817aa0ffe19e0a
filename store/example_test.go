package store_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loomkit/loom/store"
)

// A driver claims a run, creates it with a header the store reads for
// listings, appends what it feeds the run machine, and finishes it.
func Example() {
	ctx := context.Background()
	s := store.NewMemory()
	defer s.Close()

	const id, owner = "run-1", "host-a:4242"
	if err := s.Claim(ctx, id, owner, time.Minute); err != nil {
		panic(err)
	}
	created, _ := store.NewRecord(store.KindRunCreated, struct {
		store.RunHeader
		MaxTurns int `json:"max_turns"`
	}{store.RunHeader{Model: "claude-sonnet-4-5", Prompt: "fix the tests\nin ./run"}, 8})
	seq, err := s.Append(ctx, id, 0, created)
	if err != nil {
		panic(err)
	}
	turn, _ := store.NewRecord(store.KindModelTurn, map[string]any{"turn": 1})
	seq, _ = s.Append(ctx, id, seq, turn)

	// A second writer working from a stale sequence loses.
	_, err = s.Append(ctx, id, 1, turn)
	fmt.Println("stale append conflicts:", errors.Is(err, store.ErrConflict))

	// A second process cannot take the run while the claim is live.
	err = s.Claim(ctx, id, "host-b:7", time.Minute)
	var claimed *store.ClaimedError
	fmt.Println("claimed by:", errors.As(err, &claimed), claimed.Owner)

	done, _ := store.NewRecord(store.KindRunFinished, nil)
	s.Append(ctx, id, seq, done)
	s.Release(ctx, id, owner)

	info, _ := s.Get(ctx, id)
	fmt.Println(info.Status, info.Turns, info.LastSeq, info.Model, info.Prompt)
	// Output:
	// stale append conflicts: true
	// claimed by: true host-a:4242
	// done 1 3 claude-sonnet-4-5 fix the tests
}

// Resuming: claim, load the journal, replay it, and go on appending after
// its last record.
func ExampleStore_Load() {
	ctx := context.Background()
	s := store.NewMemory()
	created, _ := store.NewRecord(store.KindRunCreated, store.RunHeader{Prompt: "hi"})
	intent, _ := store.NewRecord(store.KindToolIntent, map[string]string{"call_id": "c1"})
	s.Append(ctx, "r", 0, created, intent) // then the process died

	if err := s.Claim(ctx, "r", "resumer", time.Minute); err != nil {
		panic(err)
	}
	recs, err := s.Load(ctx, "r", 0)
	if err != nil {
		panic(err)
	}
	for _, r := range recs {
		fmt.Println(r.Seq, r.Kind, string(r.Data))
	}
	info, _ := s.Get(ctx, "r")
	fmt.Println("next append after", recs[len(recs)-1].Seq, info.Status)
	// Output:
	// 1 run_created {"prompt":"hi"}
	// 2 tool_intent {"call_id":"c1"}
	// next append after 2 running
}
