// Package agent is loom's in-process driver: it runs the agent loop of
// package run against a model.Model and a tool.Set, blocking (Run) or
// streaming (Stream), with tool orchestration, approvals, budgets, loop
// guards, structured output, retries, middleware, conversation memory and,
// given a store.Store, a journal from which a run resumes in another
// process.
//
// # One loop
//
// Run, Stream, Resume and ResumeStream are faces of one loop. It asks the
// run machine (run.Run) what to do next, does the IO, and feeds the
// outcome back; every decision of the loop (turn budget, which calls are
// valid, threading history, summing usage) is the machine's. The only
// difference between Run and Stream is how a model call is made: a
// blocking call whose text is reported as one delta per part, or a stream
// whose deltas are reported as they arrive. Both produce the same Result
// and the same events but for deltas.
//
//	a := agent.New(agent.Config{Model: m, Tools: tools, Approver: agent.AllowReadOnly})
//	res, err := a.Run(ctx, agent.Prompt("Fix the failing test"))
//
//	for ev, err := range a.Stream(ctx, agent.Prompt("Fix the failing test")) {
//		if err != nil { ... }  // the last element when the run did not complete
//		switch ev := ev.(type) {
//		case agent.TextDelta:  fmt.Print(ev.Text)
//		case agent.Done:       ... ev.Result ...
//		}
//	}
//
// # Tools
//
// The calls of one model turn run within Config.ToolConcurrency: by
// default read-only calls in parallel (up to 8) and any other call alone,
// in call order. Their results are committed together, in call order,
// once every call settled. A call that stops the run (a tool middleware
// returning a *StopError, or a tool whose Go error says its machinery
// broke: *ToolError) keeps the calls that have not started from starting,
// lets running ones finish, commits nothing, and ends the run with the
// lowest-index stopper's error. A call the machine preresolved (denied,
// skipped, malformed arguments, cut off) is answered without running
// anything. A tool's failure is an error result the model reads, a panic
// too; the run goes on, until MaxFailedRounds rounds in a row fail
// entirely (*ToolFailuresError).
//
// Cancelling the context while tools run cancels their contexts; every
// call that did not finish is answered with Interrupted (or NotStarted),
// the results are committed so that the history stays valid, and the run
// returns a *RunError wrapping the context's error, with a Snapshot to
// resume from. Each call's context carries IdempotencyKey.
//
// # Invalid calls, approvals, budgets, guards
//
// A call of a tool that is not allowed goes to the InvalidToolPolicy
// (DefaultInvalidToolPolicy: repair a near miss, else re-prompt listing the
// tools while MaxInvalidRetries last, else fail). Calls of tools whose spec
// needs approval go to the Approver (AllowAll, DenyAll, AllowReadOnly,
// Rules, or your own); a tool implementing tool.Approvable is asked about
// each call's arguments, and calls it says need no approval are approved
// without asking (the agent advertises such tools to the machine as
// needing approval, and approves those calls itself). An Approver may
// suspend the run (ErrSuspend): Run returns a *SuspendedError, and Resume
// continues the run with the decisions, in this process or another.
//
// Budget limits tokens, cost in US dollars (DefaultPrices, overridable),
// time and tool calls: past a soft threshold the model is told to wrap
// up; at a limit it is asked for a final answer without tools (or the run
// fails with *BudgetError). The LoopGuard does the same for a model that
// repeats one call: a note at K identical calls, a final answer at 2K.
//
// # Structured output
//
// With Config.OutputSchema, or RunAs[T] which infers it from T, the final
// answer must be JSON matching the schema: a mismatch is sent back with
// the validation error while turns remain, and the value is returned
// decoded (or an *OutputError).
//
// # Retries
//
// Model calls go through model.Retry(Config.Retry), which retries
// failures before any output (Retrying events). A stream that fails after
// output was reported is asked again, as often as the policy allows, with
// a TurnRestarted event: the deltas of that turn so far were provisional.
// A truncated answer never reaches the machine.
//
// # Durability
//
// With Config.Store every input fed to the machine is journaled, after
// the machine accepted it, as versioned records (JournalFormat): the run's
// config and input, each model turn, each resolution, approval requests
// and decisions, a tool call's intent before it starts and its result
// after it ends, commits of results (with the notes sent and the driver's
// counters), and the end of the run. A write that fails stops the run with
// a *CheckpointError: nothing is reported saved that was not. Resume
// replays the journal into a fresh machine and continues; a call that had
// started but never reported back is run again only if its tool is
// read-only or idempotent, and otherwise answered with InterruptedMaybe.
// Runs are claimed in the store while driven (the claim is renewed every
// third of Config.ClaimTTL, also during a long tool call), so two
// processes never drive one run: the second Resume fails with an error
// matching store.ErrClaimed. A claim left by a process that died lapses
// after its ttl; a process with the same Config.Owner may take it at once.
// Conversations (Input.ConversationID) are loaded at the start of a run
// and appended to exactly once, when the run is done or fails for good
// (then with what it got through: see Input.ConversationID).
//
// # Concurrency
//
// An Agent is safe for concurrent use and its runs share nothing mutable.
// Events are delivered on the goroutine that called Run (or ranges over
// Stream), never concurrently. Tools, middleware, hooks, the Approver and
// the policy are shared by all runs and must be safe for concurrent use.
package agent
