package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
)

// replay feeds a journal's records into a fresh machine, in order, the
// way the live run fed them, and restores the driver's ledger. Tool
// intents and results of a batch that was never committed are kept for
// prefill.
func (x *runner) replay(recs []store.Record) error {
	created, err := decodeCreated(recs[0])
	if err != nil {
		return err
	}
	if created.Digest != x.a.digest {
		return fmt.Errorf("the agent's config (model name, system prompt, tools or limits) differs from the run's; resume it with the agent that started it")
	}
	x.r = run.New(created.Config)
	if err := x.r.Err(); err != nil {
		return fmt.Errorf("the run's config: %w", err)
	}
	x.conv = created.ConversationID
	x.recIntents = map[string]bool{}
	x.recResults = map[string]llm.ToolResult{}
	for _, rec := range recs[1:] {
		if err := x.replayOne(rec); err != nil {
			return fmt.Errorf("record %d (%s): %w", rec.Seq, rec.Kind, err)
		}
	}
	return nil
}

func (x *runner) replayOne(rec store.Record) error {
	r := x.r
	switch rec.Kind {
	case store.KindModelTurn:
		var t turnRecord
		if err := decodeData(rec, &t); err != nil {
			return err
		}
		cm, ok := r.ModelCall()
		if !ok {
			step, err := r.Next()
			if err != nil {
				return err
			}
			if cm, ok = step.(run.CallModel); !ok {
				return fmt.Errorf("the run asks for %T, not a model call", step)
			}
		}
		if cm.Turn != t.Turn {
			return fmt.Errorf("the record is for turn %d, the run is at turn %d", t.Turn, cm.Turn)
		}
		return r.ModelResponse(t.Response)
	case store.KindResolution:
		var t resolutionRecord
		if err := decodeData(rec, &t); err != nil {
			return err
		}
		res, err := run.UnmarshalResolution(t.Resolution)
		if err != nil {
			return journalMember(err)
		}
		return x.applyResolution(res)
	case store.KindApprovalRequested:
		var t approvalRequestedRecord
		if err := decodeData(rec, &t); err != nil {
			return err
		}
		if x.j.requested == nil {
			x.j.requested = map[int]bool{}
		}
		x.j.requested[t.Turn] = true
		if t.Ledger != nil {
			x.led = *t.Ledger
		}
		return nil
	case store.KindApprovalDecided:
		var t approvalDecidedRecord
		if err := decodeData(rec, &t); err != nil {
			return err
		}
		return r.Approve(t.Decisions)
	case store.KindToolIntent:
		var t intentRecord
		if err := decodeData(rec, &t); err != nil {
			return err
		}
		x.recIntents[t.Call.ID] = true
		return nil
	case store.KindToolResult:
		var t resultRecord
		if err := decodeData(rec, &t); err != nil {
			return err
		}
		x.recResults[t.Result.CallID] = t.Result
		return nil
	case store.KindNote:
		var n noteRecord
		if err := decodeData(rec, &n); err != nil {
			return err
		}
		return x.replayNote(n)
	case store.KindRunFinished:
		var t finishedRecord
		if err := decodeData(rec, &t); err != nil {
			return err
		}
		x.j.finished = true
		return nil
	case store.KindRunFailed:
		var t failedRecord
		if err := decodeData(rec, &t); err != nil {
			return err
		}
		x.failed = t.Error
		if x.failed == "" {
			x.failed = "(no reason recorded)"
		}
		return nil
	}
	return fmt.Errorf("unexpected record kind %s", rec.Kind)
}

func (x *runner) replayNote(n noteRecord) error {
	r := x.r
	switch n.Type {
	case noteCommit:
		step, err := r.Next()
		if err != nil {
			return err
		}
		if at, ok := step.(run.ApproveTools); ok {
			// Decisions that follow from the arguments are not journaled.
			if ok, err := x.autoApprove(at); err != nil || !ok {
				return fmt.Errorf("a commit of tool results, but the run waits for approval decisions that were not recorded (err: %v)", err)
			}
			if step, err = r.Next(); err != nil {
				return err
			}
		}
		ct, ok := step.(run.CallTools)
		if !ok {
			return fmt.Errorf("a commit of tool results, but the run asks for %T", step)
		}
		results := make([]llm.ToolResult, len(ct.Calls))
		for i, c := range ct.Calls {
			if c.Result != nil {
				results[i] = *c.Result
				continue
			}
			res, ok := x.recResults[c.Call.ID]
			if !ok {
				return fmt.Errorf("the commit of turn %d lacks the result of call %q", n.Turn, c.Call.ID)
			}
			results[i] = res
		}
		if err := r.ToolResults(results, n.Notes...); err != nil {
			return err
		}
		clear(x.recIntents)
		clear(x.recResults)
	case noteWrapUp:
		if err := r.WrapUp(n.Text); err != nil {
			return err
		}
	case noteRetryTurn:
		if err := r.RetryTurn(n.Text); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown note type %q", n.Type)
	}
	if n.Ledger != nil {
		x.led = *n.Ledger
	}
	return nil
}

// prefill settles, before a batch runs, the calls a resumed run already
// knows about: those with a recorded result get it; those that were
// started (an intent) but never reported back are run again if their tool
// is safe to repeat, and otherwise answered with InterruptedMaybe.
func (x *runner) prefill(ctx context.Context, turn int, calls []run.PendingCall, outs []outcome) error {
	if len(x.recIntents) == 0 && len(x.recResults) == 0 {
		return nil
	}
	for i, c := range calls {
		if outs[i].status != notStarted {
			continue
		}
		id := c.Call.ID
		if res, ok := x.recResults[id]; ok {
			outs[i] = outcome{res: res, status: finished, executed: x.recIntents[id]}
			continue
		}
		if !x.recIntents[id] || c.Spec.Effect.SafeToRepeat() {
			continue // never started, or harmless to run again
		}
		res := closedResult(c.Call, InterruptedMaybe)
		if err := x.j.result(ctx, x, turn, res); err != nil {
			return err
		}
		outs[i] = outcome{res: res, status: finished, executed: true}
	}
	clear(x.recIntents)
	clear(x.recResults)
	return nil
}

// decodeData decodes a record's data strictly, as the machine decodes its
// snapshots: a member this build does not know means another loom wrote
// the journal (or someone edited it), and reading on would half
// understand the run.
func decodeData(rec store.Record, v any) error {
	return journalMember(strictDecode(rec.Data, v))
}

// journalMember explains an unknown member in a record's data by the
// journal format; it returns other errors as they are.
func journalMember(err error) error {
	member, where, ok := unknownMember(err)
	if !ok {
		return err
	}
	return fmt.Errorf("its data holds member %s%s, which journal format %d (the format this build of loom reads) does not have: a newer loom wrote the journal, or it was edited; resume it with the loom that wrote it",
		member, where, JournalFormat)
}

// strictDecode decodes the one JSON value in data into v, refusing
// members v does not have, and members spelt in another case or given
// twice.
func strictDecode(data []byte, v any) error {
	return llm.UnmarshalExact(data, v)
}

// unknownMember returns the quoted name of the member a strict decoder
// refused and, when a nested decoder (a message's, a resolution's) did,
// where: " (in llm: message part 0)".
func unknownMember(err error) (member, where string, ok bool) {
	const prefix = "json: unknown field "
	if err == nil {
		return "", "", false
	}
	msg := err.Error()
	i := strings.LastIndex(msg, prefix)
	if i < 0 {
		return "", "", false
	}
	if ctx := strings.TrimSuffix(msg[:i], ": "); ctx != "" {
		where = " (in " + ctx + ")"
	}
	return msg[i+len(prefix):], where, true
}

// awaitedAnswer returns the text of the answer a restored run holds in
// AwaitingAdvance, and whether the driver checks it against the output
// schema: an answer without tool calls, or the final call's (as callModel
// decides). The machine has no getter for the answer; its snapshot, of the
// format package run documents, holds it.
func awaitedAnswer(r *run.Run) (text string, check bool, err error) {
	if r.State() != run.StateAwaitingAdvance {
		return "", false, nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return "", false, err
	}
	var s struct {
		Format int `json:"format"`
		Answer *struct {
			Message llm.Message `json:"message"`
			Final   bool        `json:"final"`
		} `json:"answer"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return "", false, err
	}
	if s.Format != run.Format || s.Answer == nil {
		return "", false, fmt.Errorf("the run's snapshot (format %d) holds no answer in %s", s.Format, run.StateAwaitingAdvance)
	}
	m := s.Answer.Message
	return m.Text(), s.Answer.Final || len(m.ToolCalls()) == 0, nil
}

// outputFromShape rebuilds the validator of a restored run's output
// schema.
func outputFromShape(shape *llm.OutputShape) (*outputSchema, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(shape.Schema, &s); err != nil {
		return nil, err
	}
	os, err := newOutputSchema(&s)
	if err != nil {
		return nil, err
	}
	os.shape = shape
	return os, nil
}

// StartConfig returns the machine config a stored run started with (model
// name, system prompt, tools, limits, input and prompt), read from its
// journal's first record. A driver rebuilding the agent to Resume a run
// takes the system prompt from it, since Resume refuses an agent whose
// config differs from the run's.
func StartConfig(ctx context.Context, s store.Store, runID string) (run.Config, error) {
	recs, err := s.Load(ctx, runID, 0)
	if err != nil {
		return run.Config{}, err
	}
	if len(recs) == 0 {
		return run.Config{}, store.NotFound(runID)
	}
	created, err := decodeCreated(recs[0])
	if err != nil {
		return run.Config{}, fmt.Errorf("agent: run %s: %w", runID, err)
	}
	return created.Config, nil
}

// decodeCreated decodes a journal's first record.
func decodeCreated(rec store.Record) (createdRecord, error) {
	if rec.Kind != store.KindRunCreated {
		return createdRecord{}, fmt.Errorf("record 1 is %s, want %s", rec.Kind, store.KindRunCreated)
	}
	// The format first: a journal of another format may well hold
	// members this build does not know, and the format says why.
	var head struct {
		Format int `json:"format"`
	}
	if err := rec.Decode(&head); err != nil {
		return createdRecord{}, fmt.Errorf("record 1 (%s): %w", rec.Kind, err)
	}
	if head.Format != JournalFormat {
		return createdRecord{}, fmt.Errorf("the journal is format %d; this build reads format %d", head.Format, JournalFormat)
	}
	var created createdRecord
	if err := decodeData(rec, &created); err != nil {
		return createdRecord{}, fmt.Errorf("record 1 (%s): %w", rec.Kind, err)
	}
	return created, nil
}
