package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
)

// JournalFormat is the format of the data of the journal records this
// package writes (inside store records, whose own version is
// store.Version). A journal of another format is refused on resume.
const JournalFormat = 1

// The data of each record kind. Every input fed to the machine is
// recorded after the machine accepted it, so that replaying the records
// in order into a fresh run.Run rebuilds the run exactly; tool intents are
// recorded before a tool starts and results after it ends, so a call that
// may have started is known.
type (
	createdRecord struct {
		store.RunHeader
		Format int        `json:"format"`
		RunID  string     `json:"run_id"`
		Digest string     `json:"digest"`
		Config run.Config `json:"config"`
	}
	turnRecord struct {
		Turn     int          `json:"turn"`
		Response llm.Response `json:"response"`
	}
	resolutionRecord struct {
		Turn       int             `json:"turn"`
		CallID     string          `json:"call_id"`
		Resolution json.RawMessage `json:"resolution"`
	}
	approvalRequestedRecord struct {
		Turn   int      `json:"turn"`
		Calls  []string `json:"calls"`
		Ledger *ledger  `json:"ledger,omitempty"`
	}
	approvalDecidedRecord struct {
		Turn      int            `json:"turn"`
		Decisions []run.Decision `json:"decisions"`
	}
	intentRecord struct {
		Turn int          `json:"turn"`
		Call llm.ToolCall `json:"call"`
		Key  string       `json:"key"`
	}
	resultRecord struct {
		Turn   int            `json:"turn"`
		Result llm.ToolResult `json:"result"`
	}
	// noteRecord records a decision of the driver itself: the commit of
	// a batch of results (with its notes and the ledger after it), a
	// wrap-up, or a re-prompt of a final answer.
	noteRecord struct {
		Type   string   `json:"type"`
		Turn   int      `json:"turn"`
		Text   string   `json:"text,omitempty"`
		Notes  []string `json:"notes,omitempty"`
		Ledger *ledger  `json:"ledger,omitempty"`
	}
	finishedRecord struct {
		Output string    `json:"output"`
		Usage  llm.Usage `json:"usage,omitzero"`
	}
	failedRecord struct {
		Error string `json:"error"`
	}
)

const (
	noteCommit    = "commit"
	noteWrapUp    = "wrap_up"
	noteRetryTurn = "retry_turn"
)

// journal writes a run's records to the store. Its methods are no-ops on
// a nil journal (an agent without a Store). Appends are serialized: tools
// running in parallel record their intents and results through it.
type journal struct {
	s     store.Store
	id    string
	owner string
	ttl   time.Duration

	mu        sync.Mutex
	seq       int64
	claimed   time.Time
	released  bool
	requested map[int]bool // turns whose approval request is recorded
	finished  bool         // run_finished is recorded
}

func createJournal(ctx context.Context, a *Agent, id string, rc run.Config, in Input) (*journal, error) {
	j := &journal{s: a.cfg.Store, id: id, owner: a.owner, ttl: a.ttl}
	if err := j.s.Claim(ctx, id, j.owner, j.ttl); err != nil {
		return nil, &CheckpointError{Op: "claim run " + id, Err: err}
	}
	j.claimed = a.now()
	prompt := rc.Prompt.Text()
	if prompt == "" && len(rc.Input) > 0 {
		prompt = rc.Input[len(rc.Input)-1].Text()
	}
	if i := strings.IndexByte(prompt, '\n'); i >= 0 {
		prompt = prompt[:i]
	}
	if len(prompt) > store.MaxPromptSummary {
		prompt = strings.ToValidUTF8(prompt[:store.MaxPromptSummary], "")
	}
	rec := createdRecord{
		RunHeader: store.RunHeader{Model: rc.Model, Prompt: prompt, ConversationID: in.ConversationID, Meta: in.Meta},
		Format:    JournalFormat,
		RunID:     id,
		Digest:    a.digest,
		Config:    rc,
	}
	if err := j.append(ctx, a, store.KindRunCreated, rec); err != nil {
		j.release(ctx)
		return nil, err
	}
	return j, nil
}

func (j *journal) append(ctx context.Context, a *Agent, kind store.Kind, v any) error {
	if j == nil {
		return nil
	}
	rec, err := store.NewRecord(kind, v)
	if err != nil {
		return &CheckpointError{Op: string(kind), Err: err}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if now := a.now(); now.Sub(j.claimed) > j.ttl/3 {
		if err := j.s.Claim(ctx, j.id, j.owner, j.ttl); err != nil {
			return &CheckpointError{Op: "renew claim", Err: err}
		}
		j.claimed = now
	}
	seq, err := j.s.Append(ctx, j.id, j.seq, rec)
	if err != nil {
		return &CheckpointError{Op: string(kind), Err: err}
	}
	j.seq = seq
	return nil
}

// keepAlive renews the claim every third of its ttl while the run is
// driven, so that a long model call or tool does not let it lapse; a
// renewal that fails (another owner took the run, the store is gone)
// cancels the run with a *CheckpointError. It returns the function that
// stops it.
func (j *journal) keepAlive(ctx context.Context, a *Agent, cancel context.CancelCauseFunc) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(j.ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			j.mu.Lock()
			err := error(nil)
			if !j.released {
				err = j.s.Claim(ctx, j.id, j.owner, j.ttl)
				if err == nil {
					j.claimed = a.now()
				}
			}
			j.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				cancel(&CheckpointError{Op: "renew claim", Err: err})
				return
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

func (j *journal) modelTurn(ctx context.Context, x *runner, turn int, resp llm.Response) error {
	if j == nil {
		return nil
	}
	resp.Raw = nil // debugging aid only; a journal keeps what the run needs
	return j.append(ctx, x.a, store.KindModelTurn, turnRecord{Turn: turn, Response: resp})
}

func (j *journal) resolution(ctx context.Context, x *runner, turn int, callID string, res run.Resolution) error {
	if j == nil {
		return nil
	}
	b, err := run.MarshalResolution(res)
	if err != nil {
		return &CheckpointError{Op: "resolution", Err: err}
	}
	return j.append(ctx, x.a, store.KindResolution, resolutionRecord{Turn: turn, CallID: callID, Resolution: b})
}

func (j *journal) approvalRequested(ctx context.Context, x *runner, turn int, calls []run.PendingCall) error {
	if j == nil || j.requested[turn] {
		return nil
	}
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.Call.ID
	}
	led := ledgerPtr(x.led)
	led.Elapsed = x.elapsed()
	if err := j.append(ctx, x.a, store.KindApprovalRequested, approvalRequestedRecord{Turn: turn, Calls: ids, Ledger: led}); err != nil {
		return err
	}
	if j.requested == nil {
		j.requested = make(map[int]bool)
	}
	j.requested[turn] = true
	return nil
}

func (j *journal) approvalDecided(ctx context.Context, x *runner, turn int, ds []run.Decision) error {
	return j.append(ctx, x.a, store.KindApprovalDecided, approvalDecidedRecord{Turn: turn, Decisions: ds})
}

func (j *journal) intent(ctx context.Context, x *runner, turn int, c llm.ToolCall, key string) error {
	if j == nil {
		return nil // before the record is boxed: runs without a store pay nothing
	}
	return j.append(ctx, x.a, store.KindToolIntent, intentRecord{Turn: turn, Call: c, Key: key})
}

func (j *journal) result(ctx context.Context, x *runner, turn int, res llm.ToolResult) error {
	if j == nil {
		return nil // before the record is boxed: runs without a store pay nothing
	}
	return j.append(ctx, x.a, store.KindToolResult, resultRecord{Turn: turn, Result: res})
}

func (j *journal) note(ctx context.Context, x *runner, n noteRecord) error {
	if j == nil {
		return nil // before the record is boxed: runs without a store pay nothing
	}
	return j.append(ctx, x.a, store.KindNote, n)
}

// finish records the end of the run and adds its messages to its
// conversation (once: the store ignores a repeated append of the same
// messages, so a crash between the two is mended by resuming).
func (j *journal) finish(ctx context.Context, x *runner, res Result) error {
	if j == nil {
		return nil
	}
	if !j.finished {
		if err := j.append(ctx, x.a, store.KindRunFinished, finishedRecord{Output: res.Output, Usage: res.Usage}); err != nil {
			return err
		}
		j.finished = true
	}
	if x.conv != "" && len(res.Messages) > 0 {
		if err := j.s.AppendConversation(ctx, x.conv, x.id, res.Messages); err != nil {
			return &CheckpointError{Op: "append conversation " + x.conv, Err: err}
		}
	}
	j.release(ctx)
	return nil
}

// fail records that the run failed for good; a failure to record it is
// not reported (the run is over either way, and resuming it fails again).
func (j *journal) fail(ctx context.Context, x *runner, err error) {
	if j == nil {
		return
	}
	var ce *CheckpointError
	if errors.As(err, &ce) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if j.append(ctx, x.a, store.KindRunFailed, failedRecord{Error: err.Error()}) != nil || x.conv == "" {
		return
	}
	// The conversation goes on from what the run got through, so that its
	// next run knows what was asked and done: the prompt and the turns
	// whose calls were all answered.
	if msgs := answeredPrefix(x.r.History(), len(x.r.History())-len(x.r.Messages())); len(msgs) > 0 {
		j.s.AppendConversation(ctx, x.conv, x.id, msgs)
	}
}

// answeredPrefix returns the messages of hist from index from on, cut
// after the last point where every tool call has its result (nil when
// none is).
func answeredPrefix(hist []llm.Message, from int) []llm.Message {
	for n := len(hist); n > from; n-- {
		if llm.CheckHistory(hist[:n]) == nil {
			return hist[from:n:n]
		}
	}
	return nil
}

func (j *journal) release(ctx context.Context) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.released {
		return
	}
	j.released = true
	j.s.Release(context.WithoutCancel(ctx), j.id, j.owner)
}

// SnapshotFormat is the format of the snapshots in *RunError and
// *SuspendedError. A snapshot of another format is refused by Resume.
const SnapshotFormat = 1

// snapshot is a run's state for Resume without a Store: the machine's
// snapshot and the driver's ledger.
type snapshot struct {
	Format int             `json:"format"`
	RunID  string          `json:"run_id"`
	Digest string          `json:"digest"`
	Ledger ledger          `json:"ledger"`
	Run    json.Marshaler  `json:"-"`
	RunRaw json.RawMessage `json:"run"`
}

// MarshalJSON writes the run's snapshot in place.
func (s snapshot) MarshalJSON() ([]byte, error) {
	type plain snapshot
	p := plain(s)
	if s.Run != nil {
		b, err := s.Run.MarshalJSON()
		if err != nil {
			return nil, err
		}
		p.RunRaw = b
	}
	return json.Marshal(p)
}

// resume rebuilds a run for Resume and ResumeStream.
func (a *Agent) resume(ctx context.Context, res Resumption, emit func(Event) bool, src turnSource) (*runner, error) {
	if a.err != nil {
		return nil, a.err
	}
	if a.model == nil {
		return nil, &ConfigError{Field: "Model", Reason: "is nil; set Config.Model"}
	}
	x := &runner{a: a, src: src, emitf: emit, resumed: true, decisions: res.Decisions}
	switch {
	case a.cfg.Store != nil && res.RunID != "":
		if res.Snapshot != nil {
			return nil, &ConfigError{Field: "Resumption", Reason: "has both RunID and Snapshot; with a Store, resume by RunID (the journal is the run's state)"}
		}
		if err := x.replayJournal(ctx, res.RunID); err != nil {
			return nil, err
		}
	case res.Snapshot != nil:
		if a.cfg.Store != nil {
			return nil, &ConfigError{Field: "Resumption.Snapshot", Reason: "cannot be resumed by an agent with a Store; resume by RunID instead"}
		}
		if err := x.restoreSnapshot(res.Snapshot); err != nil {
			return nil, err
		}
	case res.RunID != "":
		return nil, &ConfigError{Field: "Resumption.RunID", Reason: "needs Config.Store to find the run; without a store, pass the Snapshot"}
	default:
		return nil, &ConfigError{Field: "Resumption", Reason: "names no run: set RunID (with a Store) or Snapshot"}
	}
	if err := x.checkDecisions(); err != nil {
		x.j.release(ctx)
		return nil, err
	}
	if s := x.r.Config().Schema; s != nil {
		os, err := outputFromShape(s)
		if err != nil {
			x.j.release(ctx)
			return nil, &ResumeError{RunID: x.id, Reason: "its output schema cannot be used", Err: err}
		}
		x.output = os
	}
	x.start = a.now()
	x.emit(RunStarted{RunID: x.id, Resumed: true})
	if x.output != nil {
		// A run saved right after its final answer may not have checked
		// it (the process died first), or checked it and failed without
		// recording the failure: check it as the uninterrupted run did,
		// re-prompting or failing the same way.
		text, check, err := awaitedAnswer(x.r)
		if err != nil {
			x.j.release(ctx)
			return nil, &ResumeError{RunID: x.id, Reason: "its final answer cannot be checked against the output schema", Err: err}
		}
		if check {
			if err := x.checkOutput(ctx, text); err != nil {
				return nil, x.end(ctx, err)
			}
		}
	}
	return x, nil
}

// checkDecisions refuses, before anything is driven, decisions given to a
// run that does not wait for them.
func (x *runner) checkDecisions() error {
	if x.decisions == nil {
		return nil
	}
	if x.r.State() != run.StateAwaitingApproval {
		return &ResumeError{RunID: x.id, Reason: fmt.Sprintf("decisions were given, but the run is not waiting for approval (it is in state %s)", x.r.State())}
	}
	step, err := x.r.Next() // idempotent while awaiting approval
	if err != nil {
		return &ResumeError{RunID: x.id, Reason: "the run's pending approval cannot be read", Err: err}
	}
	waiting := step.(run.ApproveTools).Calls
	for _, d := range x.decisions {
		found := false
		for _, c := range waiting {
			found = found || c.Call.ID == d.CallID
		}
		if !found {
			return &ResumeError{RunID: x.id, Reason: fmt.Sprintf("a decision is for call %q, which does not wait for approval (waiting: %s)", d.CallID, callIDs(waiting))}
		}
	}
	return nil
}

func (x *runner) restoreSnapshot(b json.RawMessage) error {
	var s struct {
		Format int             `json:"format"`
		RunID  string          `json:"run_id"`
		Digest string          `json:"digest"`
		Ledger ledger          `json:"ledger"`
		Run    json.RawMessage `json:"run"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return &ResumeError{Reason: "the snapshot is not readable", Err: err}
	}
	x.id = s.RunID
	if s.Format != SnapshotFormat {
		return &ResumeError{RunID: s.RunID, Reason: fmt.Sprintf("the snapshot is format %d; this build reads format %d", s.Format, SnapshotFormat)}
	}
	// Of this format, strictly: a member this build does not know means
	// another loom wrote the snapshot (the run's own state, inside it, is
	// decoded strictly by package run).
	if err := strictDecode(b, &s); err != nil {
		if member, where, ok := unknownMember(err); ok {
			return &ResumeError{RunID: s.RunID, Reason: fmt.Sprintf("the snapshot holds member %s%s, which agent snapshot format %d (the format this build of loom reads) does not have: a newer loom wrote it, or it was edited; resume it with the loom that wrote it", member, where, SnapshotFormat)}
		}
		return &ResumeError{RunID: s.RunID, Reason: "the snapshot is not readable", Err: err}
	}
	if s.Digest != x.a.digest {
		return &ResumeError{RunID: s.RunID, Reason: "the agent's config (model name, system prompt, tools or limits) differs from the run's; resume it with the agent that started it"}
	}
	r := new(run.Run)
	if err := json.Unmarshal(s.Run, r); err != nil {
		return &ResumeError{RunID: s.RunID, Reason: "the run's state is not readable", Err: err}
	}
	if err := r.Err(); err != nil {
		return &ResumeError{RunID: s.RunID, Reason: "the run failed", Err: err}
	}
	x.r, x.led = r, s.Ledger
	return nil
}

// replayJournal claims the run and rebuilds it from its journal.
func (x *runner) replayJournal(ctx context.Context, id string) error {
	a := x.a
	x.id = id
	j := &journal{s: a.cfg.Store, id: id, owner: a.owner, ttl: a.ttl}
	if err := j.s.Claim(ctx, id, j.owner, j.ttl); err != nil {
		return &ResumeError{RunID: id, Reason: "it cannot be claimed (another process may be driving it)", Err: err}
	}
	j.claimed = a.now()
	x.j = j
	recs, err := j.s.Load(ctx, id, 0)
	if err == nil && len(recs) == 0 {
		err = store.NotFound(id)
	}
	if err != nil {
		j.release(ctx)
		return &ResumeError{RunID: id, Reason: "its journal cannot be read", Err: err}
	}
	if err := x.replay(recs); err != nil {
		j.release(ctx)
		return &ResumeError{RunID: id, Reason: "its journal does not replay", Err: err}
	}
	j.seq = recs[len(recs)-1].Seq
	if x.failed != "" {
		j.release(ctx)
		return &ResumeError{RunID: id, Reason: "the run failed: " + x.failed}
	}
	return nil
}
