// Package runtest drives a run.Run by hand in tests: expect a step, feed an
// input, with readable expectation strings (Describe), and a Driver that
// plays a scripted model and tools until the run ends.
//
// Nothing here is safe for concurrent use; a Script belongs to one test.
package runtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
)

// Script drives one run in a test. Each expectation asks Next for a step
// and fails the test (t.Fatalf) with a readable description when another
// step or an error comes instead; each feed fails the test when the run
// refuses the input.
type Script struct {
	t testing.TB
	// R is the run being driven; tests may replace it (after a restore).
	R *run.Run
}

// New returns a Script driving r.
func New(t testing.TB, r *run.Run) *Script { return &Script{t: t, R: r} }

func (s *Script) next(want string) run.Step {
	s.t.Helper()
	step, err := s.R.Next()
	if err != nil {
		s.t.Fatalf("Next: want %s, got error: %v", want, err)
	}
	return step
}

// Expect asks Next for a step whose Describe is want.
func (s *Script) Expect(want string) run.Step {
	s.t.Helper()
	step := s.next(want)
	if got := Describe(step); got != want {
		s.t.Fatalf("Next:\n got  %s\n want %s", got, want)
	}
	return step
}

// CallModel expects a CallModel step.
func (s *Script) CallModel() run.CallModel {
	s.t.Helper()
	return expect[run.CallModel](s, "CallModel")
}

// ResolveToolCall expects a ResolveToolCall step.
func (s *Script) ResolveToolCall() run.ResolveToolCall {
	s.t.Helper()
	return expect[run.ResolveToolCall](s, "ResolveToolCall")
}

// ApproveTools expects an ApproveTools step.
func (s *Script) ApproveTools() run.ApproveTools {
	s.t.Helper()
	return expect[run.ApproveTools](s, "ApproveTools")
}

// CallTools expects a CallTools step.
func (s *Script) CallTools() run.CallTools {
	s.t.Helper()
	return expect[run.CallTools](s, "CallTools")
}

// Done expects a Done step.
func (s *Script) Done() run.Done {
	s.t.Helper()
	return expect[run.Done](s, "Done")
}

func expect[T run.Step](s *Script, name string) T {
	s.t.Helper()
	step := s.next(name)
	v, ok := step.(T)
	if !ok {
		s.t.Fatalf("Next: want %s, got %s", name, Describe(step))
	}
	return v
}

// Err expects Next to fail and returns the error.
func (s *Script) Err() error {
	s.t.Helper()
	step, err := s.R.Next()
	if err == nil {
		s.t.Fatalf("Next: want an error, got %s", Describe(step))
	}
	return err
}

// Reply feeds resp to ModelResponse.
func (s *Script) Reply(resp llm.Response) {
	s.t.Helper()
	if err := s.R.ModelResponse(resp); err != nil {
		s.t.Fatalf("ModelResponse: %v", err)
	}
}

// ReplyText feeds an answer holding text.
func (s *Script) ReplyText(text string) {
	s.t.Helper()
	s.Reply(Answer(llm.Text{Text: text}))
}

// ReplyCalls feeds an answer holding calls.
func (s *Script) ReplyCalls(calls ...llm.ToolCall) {
	s.t.Helper()
	parts := make([]llm.Part, len(calls))
	for i, c := range calls {
		parts[i] = c
	}
	s.Reply(Answer(parts...))
}

// Results feeds results to ToolResults.
func (s *Script) Results(results ...llm.ToolResult) {
	s.t.Helper()
	if err := s.R.ToolResults(results); err != nil {
		s.t.Fatalf("ToolResults: %v", err)
	}
}

// Resolve feeds res to Resolve.
func (s *Script) Resolve(res run.Resolution) {
	s.t.Helper()
	if err := s.R.Resolve(res); err != nil {
		s.t.Fatalf("Resolve(%s): %v", DescribeResolution(res), err)
	}
}

// Approve feeds decisions to Approve.
func (s *Script) Approve(decisions ...run.Decision) {
	s.t.Helper()
	if err := s.R.Approve(decisions); err != nil {
		s.t.Fatalf("Approve: %v", err)
	}
}

// Answer returns a model answer holding parts, with finish reason
// tool_calls when it holds a tool call and stop otherwise.
func Answer(parts ...llm.Part) llm.Response {
	finish := llm.FinishStop
	for _, p := range parts {
		if _, ok := p.(llm.ToolCall); ok {
			finish = llm.FinishToolCalls
		}
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Parts: parts}, FinishReason: finish}
}

// Call returns a tool call.
func Call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: args}
}

// Result returns a successful tool result.
func Result(callID, content string) llm.ToolResult {
	return llm.ToolResult{CallID: callID, Content: content}
}

// Answers returns the results a well-behaved driver feeds for calls: each
// preresolved result verbatim, and exec's result for the others.
func Answers(calls []run.PendingCall, exec func(llm.ToolCall) llm.ToolResult) []llm.ToolResult {
	out := make([]llm.ToolResult, len(calls))
	for i, c := range calls {
		if c.Result != nil {
			out[i] = *c.Result
			continue
		}
		out[i] = exec(c.Call)
		out[i].CallID = c.Call.ID
	}
	return out
}

// Describe returns a one-line description of step, the form Expect
// compares:
//
//	CallModel turn=1 messages=2 tools=[add,search] choice=auto
//	CallModel turn=3 messages=7 tools=[] choice=none final
//	ResolveToolCall turn=1 call_1 "serch" allowed=[search] suggestion="search"
//	ApproveTools turn=1 [c1 delete {"path":"x"}]
//	CallTools turn=1 [c1 search {"q":"go"}] [c2 add (preresolved)]
//	Done "the answer"
func Describe(step run.Step) string {
	switch s := step.(type) {
	case run.CallModel:
		names := make([]string, len(s.Request.Tools))
		for i, t := range s.Request.Tools {
			names[i] = t.Name
		}
		choice := string(s.Request.ToolChoice.Mode)
		if choice == "" {
			choice = "auto"
		}
		if s.Request.ToolChoice.Mode == llm.ToolSpecific {
			choice += "(" + strings.Join(s.Request.ToolChoice.Names, ",") + ")"
		}
		d := fmt.Sprintf("CallModel turn=%d messages=%d tools=[%s] choice=%s", s.Turn, len(s.Request.Messages), strings.Join(names, ","), choice)
		if s.Final {
			d += " final"
		}
		return d
	case run.ResolveToolCall:
		return fmt.Sprintf("ResolveToolCall turn=%d %s %q allowed=[%s] suggestion=%q", s.Turn, s.Call.ID, s.Call.Name, strings.Join(s.Allowed, ","), s.Suggestion)
	case run.ApproveTools:
		return fmt.Sprintf("ApproveTools turn=%d %s", s.Turn, describeCalls(s.Calls))
	case run.CallTools:
		return fmt.Sprintf("CallTools turn=%d %s", s.Turn, describeCalls(s.Calls))
	case run.Done:
		return fmt.Sprintf("Done %q", s.Output)
	case nil:
		return "no step"
	}
	return fmt.Sprintf("unknown step %T", step)
}

func describeCalls(calls []run.PendingCall) string {
	parts := make([]string, len(calls))
	for i, c := range calls {
		d := c.Call.ID + " " + c.Call.Name
		if c.Result != nil {
			d += " (preresolved)"
		} else if c.Call.Arguments != "" {
			d += " " + c.Call.Arguments
		}
		parts[i] = "[" + d + "]"
	}
	return strings.Join(parts, " ")
}

// DescribeResolution returns res as its JSON encoding.
func DescribeResolution(res run.Resolution) string {
	b, err := run.MarshalResolution(res)
	if err != nil {
		return fmt.Sprintf("%#v", res)
	}
	return string(b)
}

// Driver plays a run to its end without IO: Model answers model calls,
// Tool runs tool calls, Resolve and Approve decide. It is the smallest
// correct driver, useful as a reference and in tests.
type Driver struct {
	// Model answers a model call. Required.
	Model func(run.CallModel) (llm.Response, error)
	// Tool runs a call that is not preresolved. Nil answers "ok".
	Tool func(run.PendingCall) llm.ToolResult
	// Resolve decides about an invalid call. Nil resolves with Fail.
	Resolve func(run.ResolveToolCall) run.Resolution
	// Approve decides about calls needing approval. Nil approves them all.
	Approve func(run.ApproveTools) []run.Decision
	// Save, when set, is called after every step and every input, and the
	// run it returns is driven on (e.g. a JSON round trip).
	Save func(*run.Run) (*run.Run, error)
	// MaxSteps bounds the loop (a broken script must not hang); 0 means 1000.
	MaxSteps int
}

// Drive runs r to its end and returns the response, or the first error.
// The run driven last (after Save) is returned too.
func (d Driver) Drive(r *run.Run) (run.Response, *run.Run, error) {
	limit := d.MaxSteps
	if limit == 0 {
		limit = 1000
	}
	save := func() error {
		if d.Save == nil {
			return nil
		}
		nr, err := d.Save(r)
		if err != nil {
			return err
		}
		r = nr
		return nil
	}
	for range limit {
		step, err := r.Next()
		if err != nil {
			return run.Response{}, r, err
		}
		if err := save(); err != nil {
			return run.Response{}, r, err
		}
		switch s := step.(type) {
		case run.CallModel:
			resp, err := d.Model(s)
			if err != nil {
				return run.Response{}, r, err
			}
			err = r.ModelResponse(resp)
			if err != nil {
				return run.Response{}, r, err
			}
		case run.ResolveToolCall:
			var res run.Resolution = run.Fail{}
			if d.Resolve != nil {
				res = d.Resolve(s)
			}
			if err := r.Resolve(res); err != nil {
				return run.Response{}, r, err
			}
		case run.ApproveTools:
			var ds []run.Decision
			if d.Approve != nil {
				ds = d.Approve(s)
			} else {
				for _, c := range s.Calls {
					ds = append(ds, run.Decision{CallID: c.Call.ID, Action: run.Approved})
				}
			}
			if err := r.Approve(ds); err != nil {
				return run.Response{}, r, err
			}
		case run.CallTools:
			results := make([]llm.ToolResult, len(s.Calls))
			for i, c := range s.Calls {
				switch {
				case c.Result != nil:
					results[i] = *c.Result
				case d.Tool != nil:
					results[i] = d.Tool(c)
					results[i].CallID = c.Call.ID
				default:
					results[i] = llm.ToolResult{CallID: c.Call.ID, Content: "ok"}
				}
			}
			if err := r.ToolResults(results); err != nil {
				return run.Response{}, r, err
			}
		case run.Done:
			return s.Response, r, nil
		}
		if err := save(); err != nil {
			return run.Response{}, r, err
		}
	}
	return run.Response{}, r, fmt.Errorf("runtest: the run did not end within %d steps", limit)
}

// RoundTrip encodes r and decodes it into a new Run: a Driver.Save that
// proves the run survives a restart at every step.
func RoundTrip(r *run.Run) (*run.Run, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var nr run.Run
	if err := json.Unmarshal(b, &nr); err != nil {
		return nil, fmt.Errorf("restore %s: %w", b, err)
	}
	return &nr, nil
}
