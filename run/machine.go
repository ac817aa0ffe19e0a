package run

import "github.com/loomkit/loom/llm"

// This file is the whole machine: every input goes through step, and step's
// switch is the transition table.
//
//	state               input          next state (step returned)
//	PreparingRequest    Next           AwaitingModel (CallModel) | Failed (*MaxTurnsError)
//	PreparingRequest    WrapUp         PreparingRequest (the next call is final)
//	AwaitingModel       ModelResponse  ResolvingToolCalls | AwaitingApproval | AwaitingAdvance
//	ResolvingToolCalls  Next           ResolvingToolCalls (ResolveToolCall, again)
//	ResolvingToolCalls  Resolve        ResolvingToolCalls | AwaitingApproval | AwaitingAdvance
//	                                   | PreparingRequest (Retry) | Failed (Fail, Stop, refused)
//	AwaitingApproval    Next           AwaitingApproval (ApproveTools, again)
//	AwaitingApproval    Approve        AwaitingAdvance | Failed (an abort)
//	AwaitingAdvance     Next           ExecutingTools (CallTools) | Done (Done)
//	                                   | Failed (*TruncatedError)
//	AwaitingAdvance     RetryTurn      PreparingRequest | Failed (a tool-bearing turn)
//	ExecutingTools      Next           ExecutingTools (CallTools, again)
//	ExecutingTools      ToolResults    PreparingRequest | Failed (no results)
//	Done                Next           Done (Done, again)
//	Failed              any input      Failed (*FailedError)
//
// Any other pair is a *ProtocolError and leaves the run as it was.

type input uint8

const (
	inNext input = iota
	inModelResponse
	inResolve
	inApprove
	inToolResults
	inRetryTurn
	inWrapUp
)

var inputNames = [...]string{
	inNext:          "Next",
	inModelResponse: "ModelResponse",
	inResolve:       "Resolve",
	inApprove:       "Approve",
	inToolResults:   "ToolResults",
	inRetryTurn:     "RetryTurn",
	inWrapUp:        "WrapUp",
}

// event is one input with its arguments.
type event struct {
	in        input
	resp      llm.Response
	res       Resolution
	decisions []Decision
	results   []llm.ToolResult
	notes     []string
	text      string
}

// step applies ev. It takes the state out, leaving Failed in its place, so
// that a transition that does not complete (a bug) leaves the run Failed,
// never half-way; a *ProtocolError puts the old state back (transitions
// check their input before they change anything); any other error is
// terminal.
func (r *Run) step(ev *event) (Step, error) {
	from := r.state
	if from == stateFailed {
		return nil, &FailedError{Err: r.err}
	}
	r.state = stateFailed
	r.err = errInterrupted

	var (
		to   state
		out  Step
		err  error
		miss bool // the pair is not in the table
	)
	switch from {
	case statePreparing:
		switch ev.in {
		case inNext:
			to, out, err = r.emitModelCall()
		case inWrapUp:
			r.wrap, r.wrapReason = true, ev.text
			to = statePreparing
		default:
			miss = true
		}
	case stateAwaitingModel:
		switch ev.in {
		case inModelResponse:
			to, err = r.acceptAnswer(&ev.resp)
		default:
			miss = true
		}
	case stateResolving:
		switch ev.in {
		case inNext:
			to, out = stateResolving, r.resolveStep()
		case inResolve:
			to, err = r.resolve(ev.res)
		default:
			miss = true
		}
	case stateApproving:
		switch ev.in {
		case inNext:
			to, out = stateApproving, r.approveStep()
		case inApprove:
			to, err = r.approve(ev.decisions)
		default:
			miss = true
		}
	case stateAdvance:
		switch ev.in {
		case inNext:
			to, out, err = r.advance()
		case inRetryTurn:
			to, err = r.retryTurn(ev.text)
		default:
			miss = true
		}
	case stateExecuting:
		switch ev.in {
		case inNext:
			to, out = stateExecuting, CallTools{Turn: r.turn, Calls: r.pending}
		case inToolResults:
			to, err = r.commitResults(ev.results, ev.notes)
		default:
			miss = true
		}
	case stateDone:
		switch ev.in {
		case inNext:
			to, out = stateDone, *r.done
		default:
			miss = true
		}
	}
	if miss {
		err = r.protocolError(from, ev.in, "not allowed in this state")
	}
	if err != nil {
		if _, ok := err.(*ProtocolError); ok {
			r.state, r.err = from, nil
			return nil, err
		}
		r.err = err // terminal: the state stays Failed
		return nil, err
	}
	r.state, r.err = to, nil
	return out, nil
}

// errInterrupted is the failure left behind by a transition that did not
// complete; it is a bug in this package when seen.
var errInterrupted = &StoppedError{Reason: "internal error: a transition did not complete (please report this bug)"}

func (r *Run) protocolError(s state, in input, reason string) *ProtocolError {
	return &ProtocolError{Op: inputNames[in], State: s.String(), Reason: reason}
}

// Next returns what the driver must do now. Asking again without feeding
// anything returns the same step, except in AwaitingModel, where the model
// call was already handed out (ModelCall returns it again). After the run
// failed, Next returns a *FailedError wrapping the error that failed it.
func (r *Run) Next() (Step, error) {
	return r.step(&event{in: inNext})
}

// ModelResponse feeds the model's answer to the CallModel step. The call
// is recorded (usage, finish reason, ids, Raw) whatever happens to the
// turn later. A Truncated answer is refused with a *ProtocolError and
// nothing is recorded: call the model again, or give up on the run.
// The run keeps resp.Raw and copies resp.Message.Parts.
func (r *Run) ModelResponse(resp llm.Response) error {
	_, err := r.step(&event{in: inModelResponse, resp: resp})
	return err
}

// Resolve answers a ResolveToolCall step with Fail, Retry, Repair, Skip or
// Stop.
func (r *Run) Resolve(res Resolution) error {
	_, err := r.step(&event{in: inResolve, res: res})
	return err
}

// Approve answers an ApproveTools step with one decision per listed call.
// A decision for a call that is not listed, two for one call, a missing one
// (unless some decision is Aborted), or edited arguments that are not a
// JSON object are a *ProtocolError.
func (r *Run) Approve(decisions []Decision) error {
	_, err := r.step(&event{in: inApprove, decisions: decisions})
	return err
}

// ToolResults answers a CallTools step: exactly one result per pending call,
// in any order; preresolved calls must come back with their result
// verbatim. The results are committed in call order as one user message,
// followed by notes as text parts (empty notes are dropped); notes let a
// driver nudge the model (loop guards, budget warnings). An empty results
// slice fails the run.
func (r *Run) ToolResults(results []llm.ToolResult, notes ...string) error {
	_, err := r.step(&event{in: inToolResults, results: results, notes: notes})
	return err
}

// RetryTurn rejects a tool-free model turn in AwaitingAdvance (for example
// an answer that does not match the output schema) and asks again: the
// turn is committed (unless empty) followed by a user message holding
// feedback, and the run goes back to PreparingRequest. With empty feedback
// the turn is dropped instead and the same request is sent again. The next
// call spends the turn budget. Retrying a turn that carries tool calls
// fails the run with *StoppedError: answer invalid calls with Resolve.
func (r *Run) RetryTurn(feedback string) error {
	_, err := r.step(&event{in: inRetryTurn, text: feedback})
	return err
}

// WrapUp makes the next model call the last: it is sent tool-free (no
// tools, tool choice none) after a user message holding reason (none when
// reason is empty), and its text ends the run. Valid in PreparingRequest;
// calling it again replaces the reason.
func (r *Run) WrapUp(reason string) error {
	_, err := r.step(&event{in: inWrapUp, text: reason})
	return err
}
