// Package run is the sans-IO agent-run state machine: it makes every
// decision of the agent loop (turn budget, which tool calls are valid, how
// to recover from invalid ones, approvals, threading history, summing usage,
// the final response) and performs no IO at all. It reads no clock, uses no
// randomness, starts no goroutines and takes no context.Context, so a run
// replays deterministically and can be saved at any step (json.Marshal) and
// resumed in another process (json.Unmarshal).
//
// # Protocol
//
// A driver asks Next what to do, does the IO, and feeds the result back:
//
//	r := run.New(run.Config{Prompt: llm.UserText("hi"), Tools: specs, MaxTurns: run.Turns(10)})
//	for {
//		step, err := r.Next()
//		if err != nil {
//			return err // the run failed; every later Next returns a *FailedError
//		}
//		switch s := step.(type) {
//		case run.CallModel:
//			resp, err := model.Call(ctx, s.Request) // retry here as you like
//			if err != nil {
//				return err
//			}
//			err = r.ModelResponse(resp) // a *ProtocolError for a truncated answer: call again or give up
//		case run.ResolveToolCall:
//			var res run.Resolution = run.Fail{} // or Retry{...}, Skip{...}, Stop{...}
//			if s.Suggestion != "" {
//				res = run.Repair{Name: s.Suggestion}
//			}
//			err = r.Resolve(res)
//		case run.ApproveTools:
//			err = r.Approve(decide(s.Calls)) // one Decision per listed call; may come days later
//		case run.CallTools:
//			results := make([]llm.ToolResult, len(s.Calls))
//			for i, c := range s.Calls { // any concurrency
//				if c.Result != nil {
//					results[i] = *c.Result // preresolved: return it as is, never run the tool
//					continue
//				}
//				results[i] = execute(c.Call) // with CallID: c.Call.ID
//			}
//			err = r.ToolResults(results)
//		case run.Done:
//			return s.Output
//		}
//		if err != nil {
//			return err
//		}
//	}
//
// Steps are a closed set: CallModel, ResolveToolCall, ApproveTools,
// CallTools, Done. Inputs are facts: ModelResponse, Resolve, Approve,
// ToolResults, and three driver decisions: RetryTurn (re-prompt after a
// tool-free answer, e.g. one that does not match the output schema), WrapUp
// (make the next call tool-free and final) and the notes argument of
// ToolResults (text after the results, to nudge the model). Getters: State,
// Turn, Usage, Calls, Messages, History, Pending, ModelCall, Response, Err,
// Config.
//
// # States
//
//	PreparingRequest → AwaitingModel → ResolvingToolCalls → (AwaitingApproval) →
//	AwaitingAdvance → {ExecutingTools → PreparingRequest | Done}, and Failed.
//
// Next is idempotent: asked again without input it returns the same
// ResolveToolCall, ApproveTools, CallTools or Done. The one exception is
// AwaitingModel: the call was handed out already (it spent a turn), so Next
// is a protocol error there and ModelCall returns the call again, for a
// driver that restored a run saved while the model was awaited.
//
// # Rules
//
//   - Config.MaxTurns is the exact number of model calls, re-prompts
//     included; nil means 1 and Turns(0) allows none. A further call fails
//     with *MaxTurnsError, unless GracefulLastTurn made the last allowed call
//     tool-free, in which case its text ends the run.
//   - A call is valid when its name is allowed on its turn (every advertised
//     tool under tool choice auto or required, none under none, the named
//     ones under specific). Invalid calls come one at a time as
//     ResolveToolCall; see Fail, Retry, Repair, Skip and Stop.
//   - Calls without an id, or whose id the run has used before, get a minted
//     one ("call_<turn>_<position>"); the provider's is kept in
//     llm.ToolCall.ProviderID. Adapters send ToolCall.ID.
//   - A call whose arguments are not one JSON object, and a call cut off by
//     the output limit, is never run: CallTools carries it with a
//     preresolved error result the model can learn from. A Truncated answer
//     (a cut stream) is refused by ModelResponse.
//   - Calls of tools marked NeedsApproval wait for ApproveTools decisions;
//     a denied call's result is "Tool call denied: <reason>".
//   - ToolResults takes exactly one result per pending call, in any order,
//     and commits them in call order as one user message.
//   - A turn that delivered no answer (no tool call, no text, no image) and
//     stopped for length or content filter fails the run with
//     *TruncatedError; partial text stopped by length is the answer. An
//     empty turn is not committed to history.
//
// The history the run sends never holds a tool call without exactly one
// result in the next message, nor a result without its call.
//
// # Errors
//
// A call that does not fit the state, or input that does not fit the step,
// returns a *ProtocolError and leaves the run exactly as it was. Terminal
// failures (*MaxTurnsError, *UnknownToolError, *StoppedError,
// *TruncatedError, *ConfigError) are returned by the call that caused them;
// after that every call returns a *FailedError wrapping the original. Each
// has a sentinel for errors.Is.
//
// # Ownership and concurrency
//
// A Run is not safe for concurrent use. Steps and getters share memory with
// the run instead of copying history (which is why Next costs the same at
// any history length): CallModel.Request.Messages, Done.Messages,
// CallTools.Calls and the rest must be read, never modified. They stay
// valid and unchanged for the life of the run.
//
// # Snapshots
//
// json.Marshal(r) writes {"format":1,...}; json.Unmarshal into a new Run
// restores it exactly, at any state. Another format, or an unknown field,
// is refused with a *SnapshotError naming both formats.
package run
