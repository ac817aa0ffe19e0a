package temporal

import (
	"time"
	"unicode/utf8"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
)

// EventKind says what an Event reports.
type EventKind string

// The kinds of Event, in the order a turn produces them.
const (
	// EventModelCall: model call Turn starts.
	EventModelCall EventKind = "model_call"
	// EventModelAnswer: the model answered; Text is its text (cut to
	// PreviewBytes), Calls its tool calls, Usage the call's usage.
	EventModelAnswer EventKind = "model_answer"
	// EventApproval: Calls wait for decisions (send them with Approve).
	EventApproval EventKind = "approval"
	// EventDecision: Decision was accepted for one of those calls.
	EventDecision EventKind = "decision"
	// EventToolCall: tool call Call starts.
	EventToolCall EventKind = "tool_call"
	// EventToolResult: Result answers a call (Content cut to
	// PreviewBytes).
	EventToolResult EventKind = "tool_result"
	// EventContinued: the workflow continued as new (its history was
	// getting long); the run goes on.
	EventContinued EventKind = "continued"
	// EventDone ends the run: Text is the final answer (cut to
	// PreviewBytes), Usage the run's total.
	EventDone EventKind = "done"
	// EventFailed ends the run: Error says why.
	EventFailed EventKind = "failed"
	// EventCancelled ends the run: it was cancelled.
	EventCancelled EventKind = "cancelled"
)

// Terminal reports whether k ends a run.
func (k EventKind) Terminal() bool {
	return k == EventDone || k == EventFailed || k == EventCancelled
}

// PreviewBytes is how much text an Event carries at most; the whole of it
// is in the run's result.
const PreviewBytes = 1024

// Event is one step of a run's progress, as Handle.Progress yields it.
// Seq numbers events from 1 across the whole workflow, continue-as-new
// included. Texts, results and arguments are previews, cut to
// PreviewBytes; the run's result has them whole. Progress is reported per
// step: a model's answer comes whole, not as a stream of tokens.
type Event struct {
	Seq      int64             `json:"seq"`
	Kind     EventKind         `json:"kind"`
	Time     time.Time         `json:"time"` // the workflow's clock
	Turn     int               `json:"turn,omitempty"`
	Text     string            `json:"text,omitempty"`
	Calls    []llm.ToolCall    `json:"calls,omitempty"`
	Call     *llm.ToolCall     `json:"call,omitempty"`
	Result   *llm.ToolResult   `json:"result,omitempty"`
	Decision *run.Decision     `json:"decision,omitempty"`
	Usage    llm.Usage         `json:"usage,omitzero"`
	Error    string            `json:"error,omitempty"`
	Pending  []run.PendingCall `json:"pending,omitempty"`
}

// EventPage is the answer of the QueryEvents query.
type EventPage struct {
	Events []Event `json:"events"`
	// Next is the Seq to ask for next.
	Next int64 `json:"next"`
	// Missed is how many events after the asked Seq were dropped before
	// the query came (the workflow keeps the latest ones only).
	Missed int64 `json:"missed,omitempty"`
}

// Status is the answer of the QueryStatus query: where the run is.
type Status struct {
	// State is the machine's state (run.StatePreparingRequest, ...), or
	// "Starting" before the run is set up.
	State string `json:"state"`
	// Turn is the number of model calls made so far.
	Turn  int       `json:"turn"`
	Usage llm.Usage `json:"usage,omitzero"`
	// Approvals are the calls waiting for a decision, when State is
	// run.StateAwaitingApproval; Decided are the decisions received for
	// them so far.
	Approvals []run.PendingCall `json:"approvals,omitempty"`
	Decided   []run.Decision    `json:"decided,omitempty"`
	// Running are the tool calls being executed now.
	Running []llm.ToolCall `json:"running,omitempty"`
	// Runs is how many workflow runs the run has used (1 plus the times
	// it continued as new).
	Runs int `json:"runs"`
	// LastEvent is the Seq of the latest event.
	LastEvent int64 `json:"last_event"`
	// Error is why the run failed, if it did.
	Error string `json:"error,omitempty"`
}

const (
	keepEvents  = 256 // events kept for queries
	carryEvents = 32  // events carried over continue-as-new
)

// eventLog keeps the latest events of the workflow for the events query.
type eventLog struct {
	events []Event
	next   int64 // Seq of the next event
}

func (l *eventLog) add(e Event) {
	if l.next == 0 {
		l.next = 1
	}
	e.Seq = l.next
	l.next++
	e.Text = preview(e.Text)
	if e.Result != nil {
		r := *e.Result
		r.Content = preview(r.Content)
		e.Result = &r
	}
	if e.Call != nil {
		c := *e.Call
		c.Arguments = preview(c.Arguments)
		e.Call = &c
	}
	if len(e.Calls) > 0 {
		calls := make([]llm.ToolCall, len(e.Calls))
		for i, c := range e.Calls {
			c.Arguments = preview(c.Arguments)
			calls[i] = c
		}
		e.Calls = calls
	}
	if len(e.Pending) > 0 {
		pending := make([]run.PendingCall, len(e.Pending))
		for i, p := range e.Pending {
			p.Call.Arguments = preview(p.Call.Arguments)
			p.Spec.Schema = nil // the model's business, and large
			pending[i] = p
		}
		e.Pending = pending
	}
	l.events = append(l.events, e)
	if len(l.events) > keepEvents {
		l.events = append(l.events[:0:0], l.events[len(l.events)-keepEvents/2:]...)
	}
}

func (l *eventLog) page(after int64) EventPage {
	p := EventPage{Next: max(after+1, 1)}
	if l.next == 0 {
		return p
	}
	for _, e := range l.events {
		if e.Seq > after {
			p.Events = append(p.Events, e)
		}
	}
	if len(p.Events) > 0 {
		if first := p.Events[0].Seq; first > after+1 {
			p.Missed = first - after - 1
		}
		p.Next = p.Events[len(p.Events)-1].Seq + 1
	}
	return p
}

func (l *eventLog) tail() []Event {
	if len(l.events) <= carryEvents {
		return l.events
	}
	return l.events[len(l.events)-carryEvents:]
}

// preview cuts s to PreviewBytes at a rune boundary.
func preview(s string) string {
	if len(s) <= PreviewBytes {
		return s
	}
	cut := PreviewBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
