package run

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/loomkit/loom/llm"
)

// Format is the snapshot format this package writes and reads. A snapshot
// of another format is refused with a *SnapshotError naming both.
const Format = 1

// snapshot is the encoded run, format 1.
type snapshot struct {
	Format   int           `json:"format"`
	State    string        `json:"state"`
	Config   Config        `json:"config"`
	Messages []llm.Message `json:"messages"` // the run's new messages
	Turn     int           `json:"turn"`
	Retries  int           `json:"invalid_retries,omitempty"`
	Usage    llm.Usage     `json:"usage,omitzero"`
	Calls    []CallRecord  `json:"calls,omitempty"`
	WrapUp   *wrapJSON     `json:"wrap_up,omitempty"`
	Final    bool          `json:"final,omitempty"`
	Answer   *turnJSON     `json:"answer,omitempty"`  // ResolvingToolCalls, AwaitingApproval, AwaitingAdvance, Done
	Pending  []PendingCall `json:"pending,omitempty"` // ExecutingTools
	Failure  *failureJSON  `json:"failure,omitempty"` // Failed
}

type wrapJSON struct {
	Reason string `json:"reason,omitempty"`
}

type turnJSON struct {
	Message   llm.Message       `json:"message"`
	Original  *llm.Message      `json:"original,omitempty"` // when repairs or edits changed Message
	Results   []*llm.ToolResult `json:"results,omitempty"`  // preresolved, per call
	Next      int               `json:"next,omitempty"`
	Skipped   bool              `json:"skipped,omitempty"`
	Approvals []int             `json:"approvals,omitempty"`
	Final     bool              `json:"final,omitempty"`
	Finish    llm.FinishReason  `json:"finish_reason,omitempty"`
}

type failureJSON struct {
	Type         string           `json:"type"`
	MaxTurns     int              `json:"max_turns,omitempty"`
	Name         string           `json:"name,omitempty"`
	CallID       string           `json:"call_id,omitempty"`
	Allowed      []string         `json:"allowed,omitempty"`
	Field        string           `json:"field,omitempty"`
	FinishReason llm.FinishReason `json:"finish_reason,omitempty"`
	Reason       string           `json:"reason,omitempty"`
}

// MarshalJSON encodes everything needed to continue the run at its state:
// config, messages, budgets spent, usage and call records, and the pending
// answer, calls, approval or failure. The config's Input is written once.
// It has a value receiver so that encoding a Run value, not only a *Run,
// writes the snapshot.
func (r Run) MarshalJSON() ([]byte, error) {
	if r.hist == nil && r.state == statePreparing && r.ids == nil {
		return nil, errors.New("run: cannot encode a zero Run; start one with New")
	}
	s := snapshot{
		Format:   Format,
		State:    r.state.String(),
		Config:   r.cfg,
		Messages: r.Messages(),
		Turn:     r.turn,
		Retries:  r.retries,
		Usage:    r.usage,
		Calls:    r.calls,
		Final:    r.final && r.state == stateAwaitingModel,
		Pending:  r.Pending(),
	}
	if r.wrap && r.state == statePreparing {
		s.WrapUp = &wrapJSON{Reason: r.wrapReason}
	}
	switch r.state {
	case stateResolving, stateApproving, stateAdvance:
		t := r.mt
		tj := &turnJSON{Message: t.msg, Results: t.pre, Next: t.next, Skipped: t.skipped, Approvals: t.approvals, Final: t.final, Finish: t.finish}
		if t.changed {
			tj.Original = &t.orig
		}
		s.Answer = tj
	case stateDone:
		s.Answer = &turnJSON{Message: r.done.Message}
	case stateFailed:
		s.Failure = encodeFailure(r.err)
	}
	return json.Marshal(s)
}

func encodeFailure(err error) *failureJSON {
	switch e := err.(type) {
	case *MaxTurnsError:
		return &failureJSON{Type: "max_turns", MaxTurns: e.MaxTurns}
	case *UnknownToolError:
		return &failureJSON{Type: "unknown_tool", Name: e.Name, CallID: e.CallID, Allowed: e.Allowed, Reason: e.Reason}
	case *StoppedError:
		return &failureJSON{Type: "stopped", Reason: e.Reason}
	case *TruncatedError:
		return &failureJSON{Type: "truncated", FinishReason: e.FinishReason}
	case *ConfigError:
		return &failureJSON{Type: "config", Field: e.Field, Reason: e.Reason}
	}
	return &failureJSON{Type: "stopped", Reason: err.Error()}
}

func (f *failureJSON) decode() (error, error) {
	switch f.Type {
	case "max_turns":
		return &MaxTurnsError{MaxTurns: f.MaxTurns}, nil
	case "unknown_tool":
		return &UnknownToolError{Name: f.Name, CallID: f.CallID, Allowed: f.Allowed, Reason: f.Reason}, nil
	case "stopped":
		return &StoppedError{Reason: f.Reason}, nil
	case "truncated":
		return &TruncatedError{FinishReason: f.FinishReason}, nil
	case "config":
		return &ConfigError{Field: f.Field, Reason: f.Reason}, nil
	}
	return nil, fmt.Errorf("unknown failure type %q", f.Type)
}

// UnmarshalJSON restores a run encoded by MarshalJSON into r, which must be
// a new Run (var r run.Run, or new(run.Run)). A snapshot of another format,
// with unknown fields, or whose parts do not fit together is refused with a
// *SnapshotError, and r is left unchanged.
func (r *Run) UnmarshalJSON(data []byte) error {
	var head struct {
		Format *int `json:"format"`
	}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&head); err != nil {
		return &SnapshotError{Reason: fmt.Sprintf("not a run snapshot: %v", err)}
	}
	if head.Format == nil {
		return &SnapshotError{Reason: "the document has no \"format\" member, so it is not a run snapshot"}
	}
	if *head.Format != Format {
		return &SnapshotError{Format: *head.Format, Reason: "the format is not one this version reads; resume it with the version that wrote it"}
	}
	var s snapshot
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return &SnapshotError{Format: Format, Reason: fmt.Sprintf("%v (a field this version does not know means a newer format wrote it)", err)}
	}
	if len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
		return &SnapshotError{Format: Format, Reason: "trailing data after the snapshot"}
	}
	// encoding/json folds case and keeps the last of a member given
	// twice; this format's member names are exact and appear once.
	if err := llm.CheckMembers(data, &s); err != nil {
		return &SnapshotError{Format: Format, Reason: err.Error()}
	}
	nr, err := restore(&s)
	if err != nil {
		return &SnapshotError{Format: Format, Reason: err.Error()}
	}
	*r = *nr
	return nil
}

// restore rebuilds a run from s and checks that its parts fit together, so
// that a hand-edited or corrupted snapshot cannot break the machine's
// invariants.
func restore(s *snapshot) (*Run, error) {
	st := slices.Index(stateNames[:], s.State)
	if st < 0 {
		return nil, fmt.Errorf("unknown state %q", s.State)
	}
	r := New(s.Config)
	if r.state == stateFailed && state(st) != stateFailed {
		return nil, fmt.Errorf("the config is invalid: %v", r.err)
	}
	if r.state == stateFailed {
		// A run that failed on its config: rebuild what New skipped.
		r.ids = make(map[string]struct{})
	}
	// New committed the prompt; the snapshot's messages include it.
	r.hist = r.hist[:r.inputLen]
	for i, m := range s.Messages {
		if m.Role == "" {
			return nil, fmt.Errorf("message %d has no role", i)
		}
		r.hist = append(r.hist, m)
		r.noteIDs(m)
	}
	if p := s.Config.Prompt; len(p.Parts) > 0 && (len(s.Messages) == 0 || !sameJSON(s.Messages[0], p)) {
		return nil, errors.New("the first message is not the config's prompt")
	}
	r.state, r.err = state(st), nil
	r.turn, r.retries, r.usage, r.calls = s.Turn, s.Retries, s.Usage, s.Calls
	limit := r.cfg.maxTurns()
	switch {
	case s.Turn < 0 || s.Turn > limit:
		return nil, fmt.Errorf("turn %d is outside the budget of %d", s.Turn, limit)
	case s.Retries < 0 || s.Retries > r.cfg.MaxInvalidRetries:
		return nil, fmt.Errorf("%d invalid-call retries exceed the budget of %d", s.Retries, r.cfg.MaxInvalidRetries)
	case len(s.Calls) > s.Turn:
		return nil, fmt.Errorf("%d call records for %d turns", len(s.Calls), s.Turn)
	}
	for i, c := range s.Calls {
		if c.Index != i {
			return nil, fmt.Errorf("call record %d has index %d", i, c.Index)
		}
	}
	if s.WrapUp != nil {
		r.wrap, r.wrapReason = true, s.WrapUp.Reason
	}
	r.final = s.Final
	if (s.Answer != nil) != (r.state == stateResolving || r.state == stateApproving || r.state == stateAdvance || r.state == stateDone) {
		return nil, fmt.Errorf("state %s and the presence of an answer disagree", s.State)
	}
	if (len(s.Pending) > 0) != (r.state == stateExecuting) {
		return nil, fmt.Errorf("state %s and the presence of pending calls disagree", s.State)
	}
	if (s.Failure != nil) != (r.state == stateFailed) {
		return nil, fmt.Errorf("state %s and the presence of a failure disagree", s.State)
	}
	if s.Final && r.state != stateAwaitingModel {
		return nil, errors.New("only an awaited call can be final")
	}
	if r.wrap && r.state != statePreparing {
		return nil, errors.New("only a run preparing its request can have a pending wrap-up")
	}

	// The history a model would see must hold every call's result; in
	// ExecutingTools the last message's calls are the pending ones.
	// A failed run sends nothing more, so its history is not checked.
	hist := r.hist
	if r.state == stateExecuting {
		if err := r.restorePending(s.Pending); err != nil {
			return nil, err
		}
		hist = hist[:len(hist)-1]
	}
	if r.state != stateFailed {
		if err := llm.CheckHistory(hist); err != nil {
			return nil, err
		}
	}
	if r.state == stateExecuting || r.state == stateDone {
		if s.Turn == 0 || len(s.Calls) != s.Turn {
			return nil, fmt.Errorf("state %s needs one call record per turn", s.State)
		}
	}
	switch r.state {
	case stateResolving, stateApproving, stateAdvance:
		if len(s.Calls) != s.Turn || s.Turn == 0 {
			return nil, fmt.Errorf("state %s needs one call record per turn", s.State)
		}
		if err := r.restoreAnswer(s.Answer); err != nil {
			return nil, err
		}
	case stateAwaitingModel:
		if s.Turn == 0 || len(s.Calls) != s.Turn-1 {
			return nil, errors.New("an awaited call needs a spent turn and no record yet")
		}
	case statePreparing:
		if len(s.Calls) != s.Turn {
			return nil, errors.New("a run preparing its request needs one call record per turn")
		}
	case stateDone:
		m := s.Answer.Message
		if !m.IsEmpty() && (len(r.hist) == r.inputLen || !sameJSON(r.hist[len(r.hist)-1], m)) {
			return nil, errors.New("the answer of a done run is not its last message")
		}
		if m.Role != llm.RoleAssistant || len(m.ToolCalls()) > 0 {
			return nil, errors.New("the answer of a done run must be an assistant message without tool calls")
		}
		r.done = &Done{Response{Output: m.Text(), Message: m, Messages: r.Messages(), Usage: r.usage, Calls: r.Calls()}}
	case stateFailed:
		err, ferr := s.Failure.decode()
		if ferr != nil {
			return nil, ferr
		}
		r.err = err
	}
	return r, nil
}

func (r *Run) restorePending(pend []PendingCall) error {
	last := r.hist[len(r.hist)-1]
	calls := last.ToolCalls()
	if last.Role != llm.RoleAssistant || len(calls) != len(pend) {
		return errors.New("the pending calls are not those of the last message")
	}
	for i, p := range pend {
		if !sameJSON(p.Call, calls[i]) {
			return fmt.Errorf("pending call %d is not call %d of the last message", i, i)
		}
		if p.Result != nil && p.Result.CallID != p.Call.ID {
			return fmt.Errorf("the preresolved result of pending call %d answers another call", i)
		}
		if p.Result == nil && !r.rules.allowed[p.Call.Name] {
			return fmt.Errorf("pending call %d names %q, which is not allowed, and has no result", i, p.Call.Name)
		}
		if p.Result == nil && !sameJSON(p.Spec, r.spec(p.Call.Name)) {
			return fmt.Errorf("pending call %d names no advertised tool, or another spec", i)
		}
	}
	r.pending = pend
	return nil
}

func (r *Run) restoreAnswer(a *turnJSON) error {
	t := &modelTurn{msg: a.Message, orig: a.Message, pre: a.Results, next: a.Next, skipped: a.Skipped, approvals: a.Approvals, final: a.Final, finish: a.Finish}
	if a.Original != nil {
		t.orig, t.changed = *a.Original, true
	}
	if t.msg.Role != llm.RoleAssistant || t.orig.Role != llm.RoleAssistant || len(t.orig.Parts) != len(t.msg.Parts) {
		return errors.New("the answer is not an assistant message matching its original")
	}
	for i, p := range t.msg.Parts {
		c, isCall := p.(llm.ToolCall)
		oc, origCall := t.orig.Parts[i].(llm.ToolCall)
		if isCall != origCall || (isCall && c.ID != oc.ID) {
			return fmt.Errorf("part %d of the answer does not match its original", i)
		}
		if _, isResult := p.(llm.ToolResult); isResult {
			return errors.New("the answer holds a tool result")
		}
		if isCall {
			if c.ID == "" {
				return fmt.Errorf("call %d of the answer has no id", len(t.calls))
			}
			if _, dup := r.ids[c.ID]; dup {
				return fmt.Errorf("call id %q of the answer is used twice", c.ID)
			}
			r.ids[c.ID] = struct{}{}
			t.calls = append(t.calls, i)
		}
	}
	if t.final && len(t.calls) > 0 {
		return errors.New("the answer to a final call holds tool calls")
	}
	if len(t.pre) == 0 && len(t.calls) > 0 {
		t.pre = make([]*llm.ToolResult, len(t.calls))
	}
	if len(t.pre) != len(t.calls) {
		return fmt.Errorf("%d preresolved slots for %d calls", len(t.pre), len(t.calls))
	}
	for i, p := range t.pre {
		if p != nil && p.CallID != t.call(i).ID {
			return fmt.Errorf("preresolved result %d answers another call", i)
		}
	}
	r.mt = t
	switch r.state {
	case stateResolving:
		if t.next < 0 || t.next >= len(t.calls) || t.pre[t.next] != nil || r.rules.allowed[t.call(t.next).Name] || t.skipped {
			return errors.New("the answer has no invalid call at its scan position")
		}
	case stateApproving:
		if len(t.approvals) == 0 || t.skipped {
			return errors.New("no call awaits approval")
		}
		fallthrough
	case stateAdvance:
		if t.next != len(t.calls) {
			return errors.New("the answer's scan is not finished")
		}
		for i := range t.calls {
			if t.pre[i] == nil && !r.rules.allowed[t.call(i).Name] {
				return fmt.Errorf("call %d names a tool that is not allowed and has no result", i)
			}
		}
	}
	seen := make(map[int]bool)
	for _, at := range t.approvals {
		if at < 0 || at >= len(t.calls) || seen[at] || t.pre[at] != nil {
			return fmt.Errorf("approval slot %d is not a call that can run", at)
		}
		seen[at] = true
	}
	if r.state != stateApproving && len(t.approvals) > 0 {
		return errors.New("approvals are listed outside AwaitingApproval")
	}
	return nil
}

func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
