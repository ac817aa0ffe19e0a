package runstate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
)

// journal is a journal fixture, read strictly (store.ReadJournal).
type journal struct {
	name string
	id   string // the run id, from its run_created record
	recs []store.Record
}

func loadJournal(t *testing.T, name string) journal {
	t.Helper()
	path := filepath.Join(journalFixtures, name+".jsonl")
	recs, err := store.ReadJournal(bytes.NewReader(read(t, path)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var created struct {
		RunID string `json:"run_id"`
	}
	if err := recs[0].Decode(&created); err != nil || created.RunID == "" {
		t.Fatalf("%s: run_created has no run id (%v)", path, err)
	}
	return journal{name: name, id: created.RunID, recs: recs}
}

// store returns a store holding the first n records of the journal (all
// of them when n <= 0): the journal as a process that died after
// writing record n left it.
func (j journal) store(t *testing.T, n int) *store.Memory {
	t.Helper()
	recs := j.recs
	if n > 0 {
		recs = recs[:n]
	}
	mem := store.NewMemory()
	if _, err := mem.Append(context.Background(), j.id, 0, recs...); err != nil {
		t.Fatalf("%s: load into a store: %v", j.name, err)
	}
	return mem
}

// payloads decodes the data of the records of one kind.
func payloads[T any](t *testing.T, recs []store.Record, kind store.Kind) []T {
	t.Helper()
	var out []T
	for _, r := range recs {
		if r.Kind != kind {
			continue
		}
		var v T
		if err := r.Decode(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// The payloads, as docs/run-state.md describes them; only the members the
// tests read.
type (
	turnPayload struct {
		Turn     int          `json:"turn"`
		Response llm.Response `json:"response"`
	}
	intentPayload struct {
		Turn int          `json:"turn"`
		Call llm.ToolCall `json:"call"`
		Key  string       `json:"key"`
	}
	resultPayload struct {
		Turn   int            `json:"turn"`
		Result llm.ToolResult `json:"result"`
	}
	decidedPayload struct {
		Turn      int            `json:"turn"`
		Decisions []run.Decision `json:"decisions"`
	}
	finishedPayload struct {
		Output string    `json:"output"`
		Usage  llm.Usage `json:"usage"`
	}
	failedPayload struct {
		Error string `json:"error"`
	}
)

// recorded returns the model's answers as the journal recorded them, by
// turn, plus extra answers for the turns after.
func recorded(t *testing.T, recs []store.Record, extra ...modeltest.Turn) *answers {
	t.Helper()
	var turns []modeltest.Turn
	for i, p := range payloads[turnPayload](t, recs, store.KindModelTurn) {
		if p.Turn != i+1 {
			t.Fatalf("model turn %d recorded as turn %d", i+1, p.Turn)
		}
		turns = append(turns, modeltest.Turn{Response: p.Response})
	}
	return newAnswers(append(turns, extra...)...)
}

// decide answers approval requests with the decisions a journal
// recorded for the turn.
func decide(t *testing.T, recs []store.Record) agent.Approver {
	byTurn := map[int][]run.Decision{}
	for _, p := range payloads[decidedPayload](t, recs, store.KindApprovalDecided) {
		byTurn[p.Turn] = p.Decisions
	}
	return agent.ApproverFunc(func(_ context.Context, req agent.ApprovalRequest) ([]run.Decision, error) {
		ds, ok := byTurn[req.Turn]
		if !ok {
			return nil, fmt.Errorf("no decisions recorded for turn %d", req.Turn)
		}
		return ds, nil
	})
}

// resumed is a journal resumed by the fixture agent.
type resumed struct {
	w   *world
	ans *answers
	mem store.Store
	res agent.Result
	err error
}

func resume(t *testing.T, j journal, n int, ans *answers, s setup, ds []run.Decision) resumed {
	t.Helper()
	return resumeIn(t, j.store(t, n), j, ans, s, ds)
}

// resumeIn resumes the journal's run held in st.
func resumeIn(t *testing.T, st store.Store, j journal, ans *answers, s setup, ds []run.Decision) resumed {
	t.Helper()
	h := resumed{w: &world{}, ans: ans, mem: st}
	a := newAgent(t, h.w, ans, h.mem, newClock(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)), s)
	h.res, h.err = a.Resume(context.Background(), agent.Resumption{RunID: j.id, Decisions: ds})
	return h
}

// journal returns the records the store holds after the resumption,
// each checked against the schema.
func (h resumed) journal(t *testing.T, id string) []store.Record {
	t.Helper()
	recs, err := h.mem.Load(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(t, schemaRecord, b); err != nil {
			t.Errorf("record %d written on resume: %v\n%s", r.Seq, err, b)
		}
	}
	return recs
}

// lastResults returns the tool results of the last message holding any.
func lastResults(msgs []llm.Message) []llm.ToolResult {
	for i := len(msgs) - 1; i >= 0; i-- {
		if rs := msgs[i].ToolResults(); len(rs) > 0 {
			return rs
		}
	}
	return nil
}

// A journal that ended with run_finished resumes to its recorded result
// without calling the model or any tool.
func TestFinishedJournalsReturnTheirResult(t *testing.T) {
	n := 0
	for _, f := range files(t, journalFixtures, "*.jsonl", 10) {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		j := loadJournal(t, name)
		fin := payloads[finishedPayload](t, j.recs, store.KindRunFinished)
		if len(fin) == 0 {
			continue
		}
		n++
		h := resume(t, j, 0, newAnswers(), scenarioNamed(t, name).setup, nil)
		if h.err != nil {
			t.Errorf("%s: %v", name, h.err)
			continue
		}
		if h.res.Output != fin[0].Output || h.res.Usage != fin[0].Usage || h.res.RunID != j.id {
			t.Errorf("%s: result %q %+v, recorded %q %+v", name, h.res.Output, h.res.Usage, fin[0].Output, fin[0].Usage)
		}
		if len(h.ans.calls()) > 0 || len(h.w.executions()) > 0 {
			t.Errorf("%s: resuming a finished run called the model %v and ran %v", name, h.ans.calls(), h.w.executions())
		}
		if err := llm.CheckHistory(h.res.Messages); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if got := len(h.journal(t, j.id)); got != len(j.recs) {
			t.Errorf("%s: resuming a finished run wrote %d records", name, got-len(j.recs))
		}
	}
	if n < 6 {
		t.Fatalf("only %d finished journals", n)
	}
}

// A history's first message is the run's prompt, never its input.
func TestContinuedConversationKeepsItsInput(t *testing.T) {
	j := loadJournal(t, "continued")
	h := resume(t, j, 0, newAnswers(), setup{}, nil)
	if h.err != nil {
		t.Fatal(h.err)
	}
	if len(h.res.Messages) != 2 || h.res.Messages[0].Text() != "And how many test files?" {
		t.Fatalf("messages = %+v", h.res.Messages)
	}
}

// ADVERSARIAL 38, 71: the process died while write_file (destructive)
// was running. On resume it is not run again: its call is closed with
// InterruptedMaybe. The read-only call's recorded result is kept, the
// idempotent call that never started runs once, and the next request is
// valid.
func TestCrashInADestructiveCall(t *testing.T) {
	j := loadJournal(t, "crashed_in_write")
	h := resume(t, j, 0, recorded(t, j.recs, text(usage(1, 1), "done")), setup{}, nil)
	if h.err != nil || h.res.Output != "done" {
		t.Fatalf("Resume = %q, %v", h.res.Output, h.err)
	}
	if got := h.ans.calls(); !reflect.DeepEqual(got, []int{2}) {
		t.Fatalf("model asked for turns %v, want [2]", got)
	}
	want := []execution{{Tool: "upsert_note", Args: `{"key":"count","text":"2 Go files"}`, Key: j.id + "/1/c3"}}
	if got := h.w.executions(); !reflect.DeepEqual(got, want) {
		t.Fatalf("executions %+v, want %+v", got, want)
	}
	req, _ := h.ans.request(2)
	if err := llm.CheckHistory(req.Messages); err != nil {
		t.Fatal(err)
	}
	rs := lastResults(req.Messages)
	if len(rs) != 3 || rs[0].CallID != "c1" || !strings.HasPrefix(rs[0].Content, "contents of go.mod") ||
		rs[1].CallID != "c2" || rs[1].Content != agent.InterruptedMaybe || !rs[1].IsError ||
		rs[2].CallID != "c3" || rs[2].IsError {
		t.Fatalf("results sent = %+v", rs)
	}
	// The interrupted result is journaled like any result, before the
	// commit that feeds it to the run.
	recs := h.journal(t, j.id)
	var kinds []string
	for _, r := range recs[len(j.recs):] {
		kinds = append(kinds, string(r.Kind))
	}
	if got := strings.Join(kinds, " "); got != "tool_result tool_intent tool_result note model_turn run_finished" {
		t.Fatalf("records written on resume: %s", got)
	}
	if res := payloads[resultPayload](t, recs[len(j.recs):], store.KindToolResult); res[0].Result.CallID != "c2" || res[0].Result.Content != agent.InterruptedMaybe {
		t.Fatalf("first result written on resume = %+v", res[0])
	}
}

// ADVERSARIAL 71: the process died while upsert_note (idempotent) was
// running: it runs again, once, with the same idempotency key; the
// destructive call before it, which reported back, does not.
func TestCrashInAnIdempotentCall(t *testing.T) {
	j := loadJournal(t, "crashed_in_upsert")
	intents := payloads[intentPayload](t, j.recs, store.KindToolIntent)
	h := resume(t, j, 0, recorded(t, j.recs, text(usage(1, 1), "done")), setup{}, nil)
	if h.err != nil {
		t.Fatal(h.err)
	}
	want := []execution{{Tool: "upsert_note", Args: `{"key":"count","text":"2 Go files"}`, Key: intents[2].Key}}
	if got := h.w.executions(); !reflect.DeepEqual(got, want) {
		t.Fatalf("executions %+v, want %+v", got, want)
	}
	req, _ := h.ans.request(2)
	rs := lastResults(req.Messages)
	if len(rs) != 3 || rs[1].Content != "wrote 1 bytes to count.txt" || rs[2].Content != `note "count" saved` {
		t.Fatalf("results sent = %+v", rs)
	}
}

// A run suspended for approval resumes with decisions given to another
// process; without decisions it suspends again and records nothing new.
func TestWaitingApprovalResumesWithDecisions(t *testing.T) {
	j := loadJournal(t, "waiting_approval")
	h := resume(t, j, 0, recorded(t, j.recs), setup{approver: suspend}, nil)
	var se *agent.SuspendedError
	if !errors.As(h.err, &se) || len(se.Calls) != 2 || se.RunID != j.id {
		t.Fatalf("Resume without decisions = %v", h.err)
	}
	if got := len(h.journal(t, j.id)); got != len(j.recs) {
		t.Fatalf("suspending again wrote %d records", got-len(j.recs))
	}

	ds := []run.Decision{{CallID: "c1", Action: run.Approved}, {CallID: "c2", Action: run.Denied, Reason: "keep dist"}}
	h = resume(t, j, 0, recorded(t, j.recs, text(usage(1, 1), "deleted build")), setup{approver: suspend}, ds)
	if h.err != nil || h.res.Output != "deleted build" {
		t.Fatalf("Resume = %q, %v", h.res.Output, h.err)
	}
	if got := h.w.executions(); len(got) != 1 || got[0].Args != `{"path":"build"}` || got[0].Key != j.id+"/1/c1" {
		t.Fatalf("executions = %+v", got)
	}
	req, _ := h.ans.request(2)
	if rs := lastResults(req.Messages); len(rs) != 2 || rs[1].Content != "Tool call denied: keep dist" {
		t.Fatalf("results sent = %+v", rs)
	}
	got := payloads[decidedPayload](t, h.journal(t, j.id), store.KindApprovalDecided)
	if len(got) != 1 || !reflect.DeepEqual(got[0].Decisions, ds) || got[0].Turn != 1 {
		t.Fatalf("approval_decided = %+v", got)
	}
}

// A run stopped by an unreachable model continues from its last step.
func TestModelErrorJournalContinues(t *testing.T) {
	j := loadJournal(t, "model_error")
	h := resume(t, j, 0, recorded(t, j.recs, text(usage(1, 1), "done")), setup{}, nil)
	if h.err != nil || h.res.Output != "done" {
		t.Fatalf("Resume = %q, %v", h.res.Output, h.err)
	}
	if got := h.ans.calls(); !reflect.DeepEqual(got, []int{2}) || len(h.w.executions()) != 0 {
		t.Fatalf("model turns %v, executions %v", got, h.w.executions())
	}
}

// A run that failed for good is not resumed, and says why.
func TestFailedJournalIsRefused(t *testing.T) {
	j := loadJournal(t, "failed")
	failed := payloads[failedPayload](t, j.recs, store.KindRunFailed)
	h := resume(t, j, 0, newAnswers(), setup{}, nil)
	var re *agent.ResumeError
	if !errors.As(h.err, &re) || !errors.Is(h.err, agent.ErrResume) || !strings.Contains(h.err.Error(), failed[0].Error) {
		t.Fatalf("Resume = %v; want a *ResumeError quoting %q", h.err, failed[0].Error)
	}
	if len(h.ans.calls()) > 0 {
		t.Fatal("the model was called")
	}
	info, err := h.mem.Get(context.Background(), j.id)
	if err != nil || info.Status != store.StatusFailed || info.Error != failed[0].Error {
		t.Fatalf("info = %+v, %v", info, err)
	}
}

// ADVERSARIAL 38, 71: every prefix of a journal is a state a crash
// can leave (records are appended one at a time). Resumed from each, the
// run asks the model only for the turns not recorded, runs no call whose
// result is recorded, runs again only safe calls that may have started,
// closes the others with InterruptedMaybe, and otherwise ends exactly as
// the uninterrupted run did.
func TestEveryJournalPrefixResumes(t *testing.T) {
	for _, name := range []string{"finished", "approved", "resolved", "wrapped_up", "retried_output", "continued", "model_error"} {
		j := loadJournal(t, name)
		sc := scenarioNamed(t, name)
		full := resume(t, j, 0, newAnswers(), sc.setup, nil)
		if name == "model_error" {
			full = resume(t, j, 0, recorded(t, j.recs, text(usage(1, 1), "done")), sc.setup, nil)
		}
		if full.err != nil {
			t.Fatalf("%s: %v", name, full.err)
		}
		wantMsgs, _ := json.Marshal(full.res.Messages)
		spec := map[string]llm.ToolSpec{}
		for _, s := range fixtureSpecs {
			spec[s.Name] = s
		}
		for n := 1; n < len(j.recs); n++ {
			t.Run(fmt.Sprintf("%s/%d", name, n), func(t *testing.T) {
				prefix := j.recs[:n]
				s := sc.setup
				s.approver = decide(t, j.recs)
				ans := recorded(t, j.recs, text(usage(1, 1), "done"))
				h := resume(t, j, n, ans, s, nil)
				if h.err != nil {
					t.Fatal(h.err)
				}
				if h.res.Output != full.res.Output {
					t.Fatalf("output %q, want %q", h.res.Output, full.res.Output)
				}
				recordedTurns := len(payloads[turnPayload](t, prefix, store.KindModelTurn))
				for i, turn := range ans.calls() {
					if turn != recordedTurns+1+i {
						t.Fatalf("model asked for turns %v with %d recorded", ans.calls(), recordedTurns)
					}
				}
				started := map[string]intentPayload{}
				for _, in := range payloads[intentPayload](t, prefix, store.KindToolIntent) {
					started[in.Call.ID] = in
				}
				for _, r := range payloads[resultPayload](t, prefix, store.KindToolResult) {
					if in, ok := started[r.Result.CallID]; ok && h.w.count(in.Key) > 0 {
						t.Errorf("call %s ran again although its result was recorded", in.Call.ID)
					}
					delete(started, r.Result.CallID)
				}
				interrupted := map[string]bool{}
				for id, in := range started {
					switch n := h.w.count(in.Key); {
					case spec[in.Call.Name].Effect.SafeToRepeat() && n != 1:
						t.Errorf("safe call %s that may have started ran %d times on resume, want 1", id, n)
					case !spec[in.Call.Name].Effect.SafeToRepeat() && n != 0:
						t.Errorf("destructive call %s that may have started ran again", id)
					case !spec[in.Call.Name].Effect.SafeToRepeat():
						interrupted[id] = true
					}
				}
				if err := llm.CheckHistory(h.res.Messages); err != nil {
					t.Fatal(err)
				}
				for _, m := range h.res.Messages {
					for _, r := range m.ToolResults() {
						if (r.Content == agent.InterruptedMaybe) != interrupted[r.CallID] {
							t.Errorf("result of %s: %q", r.CallID, r.Content)
						}
					}
				}
				if len(interrupted) == 0 {
					if got, _ := json.Marshal(h.res.Messages); !bytes.Equal(got, wantMsgs) {
						t.Errorf("messages differ from the uninterrupted run:\n got %s\nwant %s", got, wantMsgs)
					}
				}
				h.journal(t, j.id)
			})
		}
	}
}
