package runstate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
)

// restore decodes a snapshot file into a new run.
func restore(t *testing.T, path string) (*run.Run, []byte) {
	t.Helper()
	doc := read(t, path)
	r := new(run.Run)
	if err := json.Unmarshal(doc, r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r, doc
}

func compact(t *testing.T, doc []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, doc); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func allSnapshots(t *testing.T) []string {
	return append(files(t, snapshotFixtures, "*.json", 7), files(t, runGoldens, "snapshot_*.json", 8)...)
}

// Every snapshot of format 1 restores, and, while this build writes
// format 1, encodes back to the same document.
func TestSnapshotsRestore(t *testing.T) {
	for _, f := range allSnapshots(t) {
		r, doc := restore(t, f)
		var head struct {
			State string `json:"state"`
		}
		json.Unmarshal(doc, &head)
		if r.State() != head.State {
			t.Errorf("%s: restored in state %s, the document says %s", f, r.State(), head.State)
		}
		if run.Format != 1 {
			continue // a later format writes differently; reading is what counts
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if got, want := compact(t, again), compact(t, doc); got != want {
			t.Errorf("%s: encodes back differently:\n got %s\nwant %s", f, got, want)
		}
	}
}

// Every snapshot drives on to its end with a plain driver: a run that
// had not failed reaches Done with a history in which every call has its
// result; a failed one keeps failing with its typed error.
func TestSnapshotsDriveToTheEnd(t *testing.T) {
	for _, f := range allSnapshots(t) {
		r, _ := restore(t, f)
		state := r.State()
		failed := state == run.StateFailed
		var sent []llm.Request
		d := runtest.Driver{
			Model: func(cm run.CallModel) (llm.Response, error) {
				sent = append(sent, cm.Request)
				return runtest.Answer(llm.Text{Text: "end"}), nil
			},
			Resolve: func(rc run.ResolveToolCall) run.Resolution { return run.Skip{Reason: "no such tool"} },
			Save:    runtest.RoundTrip,
		}
		if cm, ok := r.ModelCall(); ok {
			sent = append(sent, cm.Request)
			if err := r.ModelResponse(runtest.Answer(llm.Text{Text: "end"})); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		resp, last, err := d.Drive(r)
		if failed {
			if !errors.Is(err, run.ErrFailed) {
				t.Errorf("%s: a failed run drove on: %v", f, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		switch {
		case len(sent) > 0 && resp.Output != "end":
			t.Errorf("%s: output %q after %d model calls", f, resp.Output, len(sent))
		case len(sent) == 0 && state != run.StateDone && state != run.StateAwaitingAdvance:
			t.Errorf("%s: a run in state %s ended without a model call", f, state)
		}
		for i, req := range sent {
			if err := llm.CheckHistory(req.Messages); err != nil {
				t.Errorf("%s: request %d: %v", f, i, err)
			}
		}
		if err := llm.CheckHistory(last.History()); err != nil {
			t.Errorf("%s: final history: %v", f, err)
		}
	}
}

func fixture(name string) string { return filepath.Join(snapshotFixtures, name+".json") }

// A final call awaited after a retried invalid call: the request is
// tool-free, and its answer ends the run with every call's usage summed.
func TestAwaitingFinalCallContinues(t *testing.T) {
	r, _ := restore(t, fixture("awaiting_final_call"))
	cm, ok := r.ModelCall()
	if !ok || !cm.Final || cm.Turn != 2 || cm.Request.ToolChoice.Mode != llm.ToolNone {
		t.Fatalf("ModelCall = %+v, %v", cm, ok)
	}
	req := cm.Request
	if req.Schema == nil || req.Schema.Name != "answer" || req.TopP == nil || *req.TopP != 0.9 || !slices.Equal(req.Stop, []string{"</answer>"}) {
		t.Fatalf("sampling members lost: %+v", req)
	}
	img, ok := req.Messages[0].Parts[1].(llm.Image)
	if !ok || string(img.Data) != "\x89PNG\r\n" || img.MediaType != "image/png" {
		t.Fatalf("image part = %#v", req.Messages[0].Parts[1])
	}
	// The retried turn is answered (the invalid call with the feedback),
	// and the last message says this is the last turn.
	n := len(req.Messages)
	if last := req.Messages[n-1]; last.Role != llm.RoleUser || !strings.Contains(last.Text(), "last turn") {
		t.Fatalf("last message = %+v", last)
	}
	results := req.Messages[n-2].ToolResults()
	if len(results) != 1 || results[0].CallID != "toolu_1" || !strings.Contains(results[0].Content, "call search") {
		t.Fatalf("retry results = %+v", results)
	}
	before := r.Usage()
	resp := runtest.Answer(llm.Text{Text: `{"summary":"a pipeline"}`})
	resp.Usage = llm.Usage{InputTokens: 10, OutputTokens: 5}
	if err := r.ModelResponse(resp); err != nil {
		t.Fatal(err)
	}
	step, err := r.Next()
	done, ok := step.(run.Done)
	if err != nil || !ok || done.Output != `{"summary":"a pipeline"}` {
		t.Fatalf("Next = %#v, %v", step, err)
	}
	if want := before.Add(resp.Usage); done.Usage != want || len(done.Calls) != 2 {
		t.Fatalf("usage %+v (want %+v), %d call records", done.Usage, want, len(done.Calls))
	}
}

// A skipped turn: every call already has its result, so the driver runs
// nothing and the next request carries them.
func TestAdvancingSkippedContinues(t *testing.T) {
	r, _ := restore(t, fixture("advancing_skipped"))
	step, err := r.Next()
	ct, ok := step.(run.CallTools)
	if err != nil || !ok || len(ct.Calls) != 2 {
		t.Fatalf("Next = %#v, %v", step, err)
	}
	for _, c := range ct.Calls {
		if c.Result == nil {
			t.Fatalf("call %s is not preresolved", c.Call.ID)
		}
	}
	if err := r.ToolResults(runtest.Answers(ct.Calls, nil)); err != nil {
		t.Fatal(err)
	}
	step, err = r.Next()
	cm, ok := step.(run.CallModel)
	if err != nil || !ok || cm.Turn != 2 {
		t.Fatalf("Next = %#v, %v", step, err)
	}
	results := cm.Request.Messages[len(cm.Request.Messages)-1].ToolResults()
	if len(results) != 2 || results[1].Content != "There is no grep tool; use search." || !results[1].IsError {
		t.Fatalf("results = %+v", results)
	}
}

// Pending calls with minted ids: results go to the minted ids, the
// preresolved one is returned verbatim, and the next request pairs every
// call with its result.
func TestExecutingMintedIDsContinues(t *testing.T) {
	r, _ := restore(t, fixture("executing_minted_ids"))
	pend := r.Pending()
	if len(pend) != 4 {
		t.Fatalf("%d pending calls", len(pend))
	}
	ids := map[string]bool{}
	for _, p := range pend {
		ids[p.Call.ID] = true
	}
	if len(ids) != 4 {
		t.Fatalf("pending ids are not unique: %+v", pend)
	}
	if pend[2].Call.ProviderID != "dup" || pend[2].Result == nil || !pend[2].Result.IsError {
		t.Fatalf("the duplicate id with broken arguments: %+v", pend[2])
	}
	results := runtest.Answers(pend, func(c llm.ToolCall) llm.ToolResult { return runtest.Result(c.ID, "ran "+c.Name) })
	slices.Reverse(results) // any order is accepted; the run commits in call order
	if err := r.ToolResults(results); err != nil {
		t.Fatal(err)
	}
	step, err := r.Next()
	cm, ok := step.(run.CallModel)
	if err != nil || !ok || cm.Turn != 2 {
		t.Fatalf("Next = %#v, %v", step, err)
	}
	if err := llm.CheckHistory(cm.Request.Messages); err != nil {
		t.Fatal(err)
	}
	got := cm.Request.Messages[len(cm.Request.Messages)-1].ToolResults()
	for i, res := range got {
		if res.CallID != pend[i].Call.ID {
			t.Fatalf("result %d answers %s, want %s", i, res.CallID, pend[i].Call.ID)
		}
	}
}

// Failed runs restore to their typed errors.
func TestFailedSnapshotsKeepTheirErrors(t *testing.T) {
	for name, want := range map[string]error{
		"failed_max_turns": run.ErrMaxTurns,
		"failed_stopped":   run.ErrStopped,
		"failed_truncated": run.ErrTruncated,
		"failed_config":    run.ErrConfig,
	} {
		r, _ := restore(t, fixture(name))
		_, err := r.Next()
		if !errors.Is(err, want) || !errors.Is(err, run.ErrFailed) || !errors.Is(r.Err(), want) {
			t.Errorf("%s: Next = %v, Err = %v; want %v", name, err, r.Err(), want)
		}
	}
	r, _ := restore(t, fixture("failed_max_turns"))
	var mt *run.MaxTurnsError
	if _, err := r.Next(); !errors.As(err, &mt) || mt.MaxTurns != 1 {
		t.Fatalf("max turns: %v", err)
	}
}
