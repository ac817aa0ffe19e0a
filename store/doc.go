// Package store is loom's checkpoint seam: where a driver writes down a run
// as it happens, so that another process can rebuild it and carry on after a
// crash, a restart or a days-long wait for approval.
//
// # The journal
//
// Each run has an append-only journal of Records numbered 1, 2, 3, ... with
// no gaps. The first is run_created; then the driver records, in order, every
// input it fed to the run machine (package run): committed model turns, tool
// call intents (before a tool starts) and results (after it ends), approval
// requests and decisions, resolutions of invalid tool calls, and finally
// run_finished or run_failed. Replaying the records rebuilds the run; a tool
// intent without a result tells the resuming driver that the call may have
// started. Records are versioned JSON (Version); Data is opaque to the store,
// except the few members documented at KindRunCreated and KindRunFailed that
// it reads to keep RunInfo up to date.
//
// Appending is optimistic: Append names the sequence the caller believes is
// last, and fails with a *ConflictError if the journal ends elsewhere. Two
// writers can never interleave or duplicate records; one of them loses and
// must reload. One Append is one atomic write, so a batch is all or nothing,
// and each append costs the same however long the journal already is.
//
// # Driving a run
//
//	id := newRunID()
//	if err := s.Claim(ctx, id, owner, time.Minute); err != nil { ... }
//	defer s.Release(context.WithoutCancel(ctx), id, owner)
//	created, _ := store.NewRecord(store.KindRunCreated, header) // header embeds store.RunHeader
//	seq, err := s.Append(ctx, id, 0, created)
//	for each input fed to the machine {
//		rec, _ := store.NewRecord(kind, input)
//		seq, err = s.Append(ctx, id, seq, rec) // on error: stop the run; the step is not checkpointed
//		renew the claim (Claim again) well before its ttl runs out
//	}
//
// Resuming is the same with the journal read back first:
//
//	if err := s.Claim(ctx, id, owner, ttl); err != nil { ... } // *ClaimedError: someone else is on it
//	recs, err := s.Load(ctx, id, 0)
//	seq := recs[len(recs)-1].Seq
//	replay recs into a fresh machine, then continue appending after seq
//
// The claim keeps two processes from resuming the same run: while one owner
// holds a live claim, Claim fails for every other owner with a *ClaimedError
// naming the holder. A claim that is not renewed lapses after its ttl, so a
// crashed process does not lock its runs forever. Claims guard resumption;
// the sequence check guards every write, claim or no claim.
//
// # Listing and conversations
//
// Get and List return RunInfo summaries the store maintains as it appends:
// status, times, number of model turns, and the model, first prompt line and
// conversation id from the run_created header. A run that is running by its
// journal but claimed by nobody is reported as interrupted.
//
// A conversation is the history that several runs share. When a run is done
// its driver appends the run's messages once with AppendConversation, which
// is idempotent per run, so repeating it after a crash is safe; the next run
// of the conversation starts from History.
//
// # Errors
//
// Every failure is typed: ErrInvalid for bad arguments, ErrNotFound,
// *ConflictError (ErrConflict), *ClaimedError (ErrClaimed), *VersionError
// (ErrVersion) for records of another format, ErrClosed. Any other error is
// the backend failing to read or write (disk full, read-only file, ...).
// Records are saved only when Append returns no error: a driver never
// reports a step as checkpointed otherwise, and stops the run with the
// error rather than retrying blindly. (A commit can fail after reaching the
// disk, so a failed Append may rarely have saved its records; that is why a
// resuming driver always reloads the journal instead of trusting its own
// count, and why the sequence check refuses a stale retry.)
//
// # Implementations
//
// Memory is the in-memory Store. store/sqlite is the durable one.
// Every Store passes the conformance suite in store/storetest. The exported
// helpers PrepareAppend, CheckStored, RunInfo.Apply, Effective and the Check*
// and *Conversation functions hold the rules every backend shares, so that
// backends agree on validation and on error messages.
package store
