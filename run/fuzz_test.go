package run_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
)

// bytesource hands out fuzz bytes as small choices; zero when exhausted.
type bytesource struct {
	data []byte
}

func (b *bytesource) next() int {
	if len(b.data) == 0 {
		return 0
	}
	v := b.data[0]
	b.data = b.data[1:]
	return int(v)
}

func (b *bytesource) pick(n int) int { return b.next() % n }

func (b *bytesource) str(options ...string) string { return options[b.pick(len(options))] }

// FuzzProtocol drives a run with random sequences of protocol calls and
// random inputs. It must never panic, a refused call must leave the run
// unchanged, every request must hold a valid history, the turn counter
// must never exceed the budget, and every error must be one of the typed
// errors.
func FuzzProtocol(f *testing.F) {
	f.Add([]byte{2, 1, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8})
	f.Add([]byte{5, 2, 1, 0, 0, 1, 3, 2, 1, 4, 0, 8, 8, 8, 7, 8, 8})
	f.Add([]byte{3, 0, 0, 3, 0, 1, 5, 1, 2, 2, 3, 0, 4, 1, 6, 7, 0, 1})
	f.Add([]byte{4, 1, 1, 0, 8, 1, 9, 9, 9, 9, 2, 1, 3, 3, 4, 4, 7, 7, 0, 0, 5, 5, 6, 6})
	f.Add([]byte("\x05\x02\x00\x01\x00\x08\x01\x03\x02\x01\x00\x07\x08\x08\x04\x07\x08"))
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &bytesource{data: data}
		limit := src.pick(6)
		choices := []llm.ToolChoice{{}, {Mode: llm.ToolRequired}, {Mode: llm.ToolNone}, llm.ChooseTools("add"), llm.ChooseTools("nope")}
		cfg := run.Config{
			Prompt:            prompt("go"),
			Tools:             []llm.ToolSpec{add, search(), remove},
			ToolChoice:        choices[src.pick(len(choices))],
			MaxTurns:          run.Turns(limit),
			MaxInvalidRetries: src.pick(3),
			GracefulLastTurn:  src.pick(2) == 1,
		}
		r := run.New(cfg)
		for range 120 {
			if len(src.data) == 0 {
				break
			}
			before := snapshot(t, r)
			err := fuzzOp(t, r, src, &before)
			if err != nil {
				checkTyped(t, err)
				var pe *run.ProtocolError
				if errors.As(err, &pe) {
					if after := snapshot(t, r); after != before {
						t.Fatalf("refused call changed the run:\nbefore %s\nafter  %s", before, after)
					}
				}
			}
			if r.Turn() > limit {
				t.Fatalf("turn %d exceeds the budget %d", r.Turn(), limit)
			}
			if len(r.Calls()) > r.Turn() {
				t.Fatalf("%d records for %d turns", len(r.Calls()), r.Turn())
			}
			hist := r.History()
			switch r.State() {
			case run.StateFailed:
				continue
			case run.StateExecutingTools:
				hist = hist[:len(hist)-1]
			}
			if err := llm.CheckHistory(hist); err != nil {
				t.Fatalf("state %s: %v", r.State(), err)
			}
		}
	})
}

func checkTyped(t *testing.T, err error) {
	for _, s := range []error{run.ErrProtocol, run.ErrMaxTurns, run.ErrUnknownTool, run.ErrStopped, run.ErrTruncated, run.ErrConfig, run.ErrFailed} {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("untyped error %T: %v", err, err)
}

// fuzzOp makes one or two calls; before is updated to the snapshot taken
// just before the last of them.
func fuzzOp(t *testing.T, r *run.Run, src *bytesource, before *string) error {
	switch src.pick(10) {
	case 0, 8, 9: // Next, and a well-behaved answer to its step
		step, err := r.Next()
		if err != nil {
			return err
		}
		if cm, ok := step.(run.CallModel); ok {
			if err := llm.CheckHistory(cm.Request.Messages); err != nil {
				t.Fatalf("turn %d request: %v", cm.Turn, err)
			}
			if cm.Final && cm.Request.ToolChoice.Mode != llm.ToolNone {
				t.Fatalf("final call with tools: %s", runtest.Describe(cm))
			}
		}
		if src.pick(3) == 0 {
			return nil
		}
		*before = snapshot(t, r)
		switch s := step.(type) {
		case run.CallModel:
			return r.ModelResponse(fuzzAnswer(src))
		case run.ResolveToolCall:
			return r.Resolve(fuzzResolution(src, s))
		case run.ApproveTools:
			return r.Approve(fuzzDecisions(src, s.Calls))
		case run.CallTools:
			return r.ToolResults(fuzzResults(src, s.Calls), src.str("", "note"))
		}
		return nil
	case 1:
		return r.ModelResponse(fuzzAnswer(src))
	case 2:
		return r.Resolve(fuzzResolution(src, run.ResolveToolCall{}))
	case 3:
		var listed []run.PendingCall
		if step, err := r.Next(); err == nil {
			if at, ok := step.(run.ApproveTools); ok {
				listed = at.Calls
			}
		}
		*before = snapshot(t, r)
		return r.Approve(fuzzDecisions(src, listed))
	case 4:
		return r.ToolResults(fuzzResults(src, r.Pending()), src.str("", "note", "another"))
	case 5:
		return r.RetryTurn(src.str("", "try again"))
	case 6:
		return r.WrapUp(src.str("", "wrap up"))
	case 7: // save and restore in place
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var nr run.Run
		if err := json.Unmarshal(b, &nr); err != nil {
			t.Fatalf("restore %s: %v", b, err)
		}
		if again := snapshot(t, &nr); again != string(b) {
			t.Fatalf("restore changed the run:\n%s\n%s", b, again)
		}
		*r = nr
	}
	return nil
}

func fuzzAnswer(src *bytesource) llm.Response {
	var parts []llm.Part
	for range src.pick(4) {
		switch src.pick(5) {
		case 0:
			parts = append(parts, llm.Text{Text: src.str("", "hello")})
		case 1:
			parts = append(parts, llm.Thinking{Text: "hmm"})
		default:
			parts = append(parts, llm.ToolCall{
				ID:         src.str("", "c1", "c2", "call_1_1", "call_2_1"),
				Name:       src.str("add", "search", "delete_file", "serch", "", "ADD"),
				Arguments:  src.str("", "{}", `{"a":1}`, `{"a":`, "[1]", "{}{}"),
				Incomplete: src.pick(6) == 0,
				Malformed:  src.pick(8) == 0,
			})
		}
	}
	finish := []llm.FinishReason{llm.FinishStop, llm.FinishToolCalls, llm.FinishLength, llm.FinishContentFilter, ""}
	role := llm.RoleAssistant
	if src.pick(16) == 0 {
		role = llm.RoleUser
	}
	return llm.Response{
		Message:      llm.Message{Role: role, Parts: parts},
		Usage:        llm.Usage{InputTokens: int64(src.pick(50)), OutputTokens: int64(src.pick(50))},
		FinishReason: finish[src.pick(len(finish))],
		Truncated:    src.pick(8) == 0,
	}
}

func fuzzResolution(src *bytesource, rc run.ResolveToolCall) run.Resolution {
	switch src.pick(6) {
	case 0:
		return run.Fail{}
	case 1:
		return run.Retry{Feedback: src.str("", "no")}
	case 2:
		return run.Repair{Name: src.str(rc.Suggestion, "add", "search", "delete_file", "nope")}
	case 3:
		return run.Skip{Reason: src.str("", "skipped")}
	case 4:
		return run.Stop{Reason: "stop"}
	}
	return nil
}

func fuzzDecisions(src *bytesource, listed []run.PendingCall) []run.Decision {
	var ds []run.Decision
	actions := []run.Action{run.Approved, run.Approved, run.Denied, run.Edited, run.Aborted, "bogus"}
	for _, c := range listed {
		if src.pick(10) == 0 {
			continue // missing
		}
		d := run.Decision{CallID: c.Call.ID, Action: actions[src.pick(len(actions))], Reason: "r"}
		if d.Action == run.Edited {
			d.Arguments = src.str("", `{"x":1}`, `{"x":`)
		}
		ds = append(ds, d)
		if src.pick(12) == 0 {
			ds = append(ds, d) // duplicate
		}
	}
	if src.pick(10) == 0 {
		ds = append(ds, run.Decision{CallID: "stranger", Action: run.Approved})
	}
	return ds
}

func fuzzResults(src *bytesource, calls []run.PendingCall) []llm.ToolResult {
	rs := runtest.Answers(calls, func(llm.ToolCall) llm.ToolResult { return llm.ToolResult{Content: "ok"} })
	switch src.pick(8) {
	case 0:
		return nil
	case 1:
		if len(rs) > 0 {
			rs = rs[1:]
		}
	case 2:
		if len(rs) > 0 {
			rs = append(rs, rs[0])
		}
	case 3:
		rs = append(rs, llm.ToolResult{CallID: "stranger"})
	case 4:
		for i := range rs {
			rs[i].Content = "tampered"
		}
	case 5: // reversed order is fine
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
	}
	return rs
}

// FuzzSnapshot feeds arbitrary documents to UnmarshalJSON: it must never
// panic, and a document it accepts must encode back to an equivalent
// snapshot and drive on without breaking the history invariant.
func FuzzSnapshot(f *testing.F) {
	for _, r := range goldenRuns(f) {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"format":1}`))
	f.Add([]byte(`{"format":1,"state":"Done","config":{"prompt":{"role":"user","parts":[]}},"messages":[],"turn":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r run.Run
		if err := r.UnmarshalJSON(data); err != nil {
			if !errors.Is(err, run.ErrSnapshot) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		b := snapshot(t, &r)
		var again run.Run
		if err := again.UnmarshalJSON([]byte(b)); err != nil {
			t.Fatalf("re-encoded snapshot refused: %v\n%s", err, b)
		}
		if snapshot(t, &again) != b {
			t.Fatal("snapshot not stable")
		}
		d := runtest.Driver{
			Model: checkRequests(t, func(run.CallModel) (llm.Response, error) {
				return runtest.Answer(runtest.Call("", "add", `{}`)), nil
			}),
			MaxSteps: 20,
		}
		if _, ok := r.ModelCall(); ok {
			if err := r.ModelResponse(runtest.Answer(llm.Text{Text: "x"})); err != nil {
				checkTyped(t, err)
				return
			}
		}
		_, _, err := d.Drive(&r)
		if err != nil && !errors.Is(err, run.ErrMaxTurns) && !errors.Is(err, run.ErrFailed) {
			checkTyped(t, err)
		}
	})
}
