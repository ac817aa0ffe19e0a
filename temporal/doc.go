// Package temporal runs loom agent runs as durable Temporal workflows: the
// distributed driver of the same run.Run machine the in-process agent
// drives. A run survives workers that die, tools that take hours and
// approvals that come days later; many workers share the load.
//
// # Architecture
//
// The workflow (Workflow, registered as WorkflowName) owns a run.Run and
// asks it what to do, exactly as an in-process driver does. The machine
// reads no clock, starts no goroutines and does no IO, so the workflow is
// deterministic by construction: every effect goes through an activity
// and every input through the workflow's history.
//
//	client (loom run / loom approve)           worker (loom worker)
//	  Start ──────────────▶ Workflow: run.Run.Next ─▶ loom.model  (Model.Generate)
//	  Handle.Progress ◀──── QueryEvents             ─▶ loom.tool   (Tool.Call, heartbeats)
//	  Handle.Status   ◀──── QueryStatus             ─▶ loom.describe (tool specs, at start)
//	  Approve ────────────▶ UpdateApprove           ─▶ loom.load   (after continue-as-new)
//	  Handle.Result   ◀──── Result / typed errors
//
// A worker (NewWorker, or Register on a worker of your own) has a Registry:
// models and tools by name, and a Blobs store. Input names the model and
// the tools; the tool specs come from the Registry when the run starts
// and are fixed for the run. Every worker of a task queue must have every
// model and tool its runs name.
//
// # Model calls
//
// A model call is the loom.model activity: Model.Generate with a start-to-
// close timeout, a heartbeat every third of its heartbeat timeout (a dead
// worker is noticed, and the call retried elsewhere, within it) and the
// retry policy of Options.ModelRetry. A *model.Error crosses as an
// application error whose type carries its Kind ("loom.model.auth"); kinds
// retrying cannot fix (auth, permission, bad request, not found, quota,
// context too long, ...) are non-retryable, and a provider's retry-after
// becomes the next retry's delay. The call is made under
// model.WithoutRetry, so a model wrapped in model.Retry makes one attempt
// per activity attempt instead of multiplying Temporal's retries and
// hiding them from the history. A completed call is never made again: replay reads its
// answer from the history.
//
// # Tool calls
//
// A tool call is the loom.tool activity. Calls of one turn run in call
// order, except that consecutive read-only calls run in parallel (at most
// Options.ParallelTools at once); results are fed to the run in call
// order. Calls the machine answered itself (denied, skipped, malformed)
// run nothing.
//
// Activities run at least once. Before a tool starts, the activity
// records a heartbeat saying so (the SDK sends an attempt's first
// heartbeat at once, so the record reaches the server before the tool
// runs). A retried attempt that finds the record (the worker died, or the
// attempt timed out) runs the tool again only if its effect is safe to
// repeat (read-only or idempotent); otherwise it answers the call with
// WorkerLost and the model decides. A worker that is cut off from the
// server but still alive may still finish the first attempt: a tool whose
// effect must happen once should pass CallInfo.Key (workflow id, turn and
// call id, the same on every attempt) to what it changes.
//
// A tool's Go error fails the run with a *ToolError, as in-process; a call
// whose activity fails for good (timeouts on every attempt) is answered
// with an error result instead.
//
// # Approvals
//
// Calls of tools whose spec needs approval wait for decisions sent by
// Approve (the UpdateApprove update; ParseDecision reads the decisions of
// `loom approve RUN_ID ...`). As in-process, a tool whose need depends on
// the arguments (tool.Approvable) is asked about each call, on the worker
// that got the model's answer: calls that need no decision are approved
// at once, the others wait. Its validator accepts only
// decisions for calls that wait and have none yet, each once, with a known
// action and well-formed edited arguments; anything else is a
// *RejectedError and changes nothing (rejected updates are not even
// written to the history). Several updates may decide the calls of one
// turn bit by bit; the run goes on when every call has a decision or one
// aborts. Approve derives the update id from the decisions, so a retried
// Approve (or a decision delivered twice) is answered with the first
// outcome and applied once; a decision for a call decided before is
// rejected as stale. Options.ApprovalTimeout denies what is still
// undecided after that long.
//
// # Queries and progress
//
// QueryStatus returns the run's Status (machine state, turn, usage, calls
// waiting for approval, calls running); QueryEvents returns the latest
// Events after a sequence number, which Handle.Progress polls. Queries do
// not add to the history.
//
// # Cancellation
//
// Cancelling the workflow (Handle.Cancel) stops starting anything; running
// tool activities are told and awaited; every open call is then answered:
// a finished call by its result, a call cut short by Interrupted (followed
// by what the tool said), a call that had not started by NotRun, a call
// waiting for approval by a denial. The workflow ends cancelled with the
// run's messages, a valid history a new run can continue from
// (*CancelledError from Handle.Result).
//
// # Bounded history
//
// Temporal keeps every activity input and result in the workflow's
// history, which is limited to 50 MB (and 2 MB per payload). Sending each
// model call its whole transcript would grow the history with the square
// of the turns and hit the limit after about 150 turns of 5 KB tool
// results. Instead the model activity gets a delta:
//
//   - Every message is a blob in the workers' Blobs store, under the SHA-256
//     of its JSON. The model activity stores what it is sent and the
//     answer it gets, and a chain node listing the call's new messages and
//     naming the node before (like a commit). The workflow sends the next
//     call the node covering what the store holds, plus what is new: the
//     previous answer by key, the tool results inline, except contents the
//     tool activity stored (those go by key too). Each message's content
//     is thus in the history once, as the result of the activity that made
//     it, and a model call's input is the size of one turn.
//   - The store is a cache, never the truth: the workflow holds the whole
//     run, and an activity that misses a blob (another machine, a
//     restarted process) says so and gets the whole transcript inline
//     once. MemoryBlobs (per process) is correct anywhere; a store shared
//     by the workers (DirBlobs on one machine, or your own over a shared
//     database or object store) keeps inputs small across workers.
//   - Images of tool results of 512 bytes or more go by reference too: the
//     tool activity stores their bytes and returns images whose URL is
//     ImageRefPrefix and the blob's key, with their media type; the model
//     activity puts the bytes back before calling the model. A result of
//     megabytes of screenshots is then a few hundred bytes of history.
//     Unlike the transcript, the bytes are nowhere else: the store must
//     keep them, and be shared when there are several workers (a missing
//     image fails the run with a *StoreError). A MemoryBlobs (the default)
//     is neither, so with it images stay inline. Handle.Result and the
//     events name such images by reference; ResolveImages with the
//     workers' store gives their bytes. StoreImage puts an input image
//     (in Run.Prompt or Run.Input) by reference in the same way.
//   - Before a model call, when the history passed Options.HistoryBytes or
//     HistoryEvents (or the server suggests it) and has grown since the run
//     started by at least what it started with, the workflow continues as
//     new, carrying the run's snapshot: inline up to
//     Options.InlineCarryBytes, else as keys of its messages (the next run
//     loads them with loom.load, a megabyte per activity). Each run starts
//     with its transcript in its history, so a run is carried again only
//     after it doubled: the histories of all runs stay linear in the run.
//     Carrying by reference needs a durable store shared by the workers;
//     without one a continued run fails with a *StoreError rather than go on
//     with a wrong history.
//   - The result leaves the messages out when they exceed
//     Options.ResultBytes; Handle.Result fetches them with QueryMessages.
//
// The alternative of letting the activity query the workflow for the
// messages it lacks needs no store, but puts a query (and the loading of
// the workflow on some worker) on every model call, and queries are
// limited to 4 MB answers; the store is simpler and faster.
//
// Measured (TestBoundedHistory200Turns, TestServerBoundedHistory200Turns):
// 200 turns with 5 KB tool results take about 12 KB of payload per turn
// (the tool result once as the activity's result and once in the final
// result, and the turn's own), the same at 20 turns as at 80; with
// continue-as-new at 512 KB, 3 workflow runs and under 4 MB of payloads
// in all, the largest payload being the 1 MB final result. On the dev
// server, with continue-as-new at 1,000 events: 3 runs, 4.2 MB of history.
//
// Measured (TestLargeToolResultImages, TestServerLargeToolResultImages):
// a tool result with 3.9 MB of images (1.5 MB and 3 × 800 KB) makes no
// payload over about 1 KB; on the dev server the run's history is 29
// events and under 8 KB. Inline, one 1.5 MB image makes a payload over
// 2 MB, whose activity result the server refuses.
//
// The workflow holds the whole run in memory, as a driver must (the
// machine needs it), so a continued run restores its transcript in one
// workflow task: about half a second for 2 MB measured on a loaded
// 2-core machine, near the SDK's default 1 s deadlock timeout; raise
// worker.Options.DeadlockDetectionTimeout (WorkerOptions.Worker) for runs
// whose transcripts are larger.
//
// # Results and failures
//
// Handle.Result returns the run.Response, or the typed error the run
// failed with: a *model.Error with its Kind, a *run.FailedError wrapping
// the machine's error, a *ToolError, an *InputError, a *StoreError, or a
// *CancelledError.
//
// # Versions
//
// The names of the workflow, activities, query and update, and the shapes
// of their arguments, are a contract with running workflows and recorded
// histories. The recorded histories in testdata/replay are replayed by
// TestReplay: a change of the workflow's code that would break running
// workflows fails it. Such a change needs workflow.GetVersion.
//
// # Concurrency
//
// Handles, workers and the Blobs implementations here are safe for
// concurrent use. Models and tools in a Registry must be too: a worker
// runs many activities at once.
package temporal
