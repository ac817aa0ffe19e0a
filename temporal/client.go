package temporal

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
)

// Handle is a run on Temporal, named by its workflow id (which stays the
// same when the workflow continues as new). It is what `loom run` and
// `loom approve` hold. A Handle is safe for concurrent use.
type Handle struct {
	// WorkflowID names the run; pass it to Attach, or to `loom approve`.
	WorkflowID string
	c          client.Client
}

// Start starts a run: the workflow WorkflowName with in, on
// opts.TaskQueue (empty: DefaultQueue) under opts.ID (empty: "loom-"
// followed by 16 random letters and digits), with the model's name and
// the prompt's first line in its memo (MemoModel, MemoPrompt) for List. in is checked first (see
// Input.Validate); the workers check the model and tool names when the
// run starts, and the run fails with an *InputError if they lack one.
func Start(ctx context.Context, c client.Client, in Input, opts client.StartWorkflowOptions) (*Handle, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if opts.TaskQueue == "" {
		opts.TaskQueue = DefaultQueue
	}
	if opts.ID == "" {
		opts.ID = "loom-" + rand.Text()[:16]
	}
	memo := map[string]any{MemoModel: in.Model, MemoPrompt: promptLine(in.Run)}
	for k, v := range opts.Memo {
		memo[k] = v
	}
	opts.Memo = memo
	wr, err := c.ExecuteWorkflow(ctx, opts, WorkflowName, in)
	if err != nil {
		return nil, fmt.Errorf("temporal: starting the run: %w", err)
	}
	return &Handle{WorkflowID: wr.GetID(), c: c}, nil
}

// Attach returns a Handle for the run with workflow id id, started
// earlier (by this process or another).
func Attach(c client.Client, id string) *Handle {
	return &Handle{WorkflowID: id, c: c}
}

// Result waits for the run to end and returns its response. A failed run
// returns the typed error it failed with: a *model.Error (with its Kind)
// for a model call that failed for good, a *run.FailedError wrapping the
// machine's error (*run.MaxTurnsError, ...), a *ToolError, an *InputError
// or a *StoreError. A cancelled run returns a *CancelledError holding the
// messages so far. Other errors (the workflow was terminated or timed out,
// the server is unreachable) are the SDK's.
func (h *Handle) Result(ctx context.Context) (run.Response, error) {
	var res Result
	err := decodeError(h.c.GetWorkflow(ctx, h.WorkflowID, "").Get(ctx, &res))
	var ce *CancelledError
	switch {
	case err == nil && res.Omitted > 0:
		if res.Response.Messages, err = h.messages(ctx, res.Omitted); err != nil {
			return run.Response{}, err
		}
	case errors.As(err, &ce) && ce.omitted > 0:
		msgs, merr := h.messages(ctx, ce.omitted)
		if merr != nil {
			return run.Response{}, merr
		}
		ce.Response.Messages, ce.omitted = msgs, 0
	}
	return res.Response, err
}

// messages fetches the run's n messages with the QueryMessages query.
func (h *Handle) messages(ctx context.Context, n int) ([]llm.Message, error) {
	msgs := make([]llm.Message, 0, n)
	for len(msgs) < n {
		v, err := h.c.QueryWorkflow(ctx, h.WorkflowID, "", QueryMessages, len(msgs))
		if err != nil {
			return nil, fmt.Errorf("temporal: fetching the messages of %s: %w", h.WorkflowID, err)
		}
		var page MessagePage
		if err := v.Get(&page); err != nil {
			return nil, err
		}
		if len(page.Messages) == 0 || page.Total != n {
			return nil, fmt.Errorf("temporal: fetching the messages of %s: the workflow answered %d of %d messages", h.WorkflowID, len(page.Messages), page.Total)
		}
		msgs = append(msgs, page.Messages...)
	}
	return msgs, nil
}

// Status asks the run where it is (the QueryStatus query). It needs a
// worker of the run's task queue to answer.
func (h *Handle) Status(ctx context.Context) (Status, error) {
	var s Status
	v, err := h.c.QueryWorkflow(ctx, h.WorkflowID, "", QueryStatus)
	if err != nil {
		return s, fmt.Errorf("temporal: status of %s: %w", h.WorkflowID, err)
	}
	return s, v.Get(&s)
}

// Cancel asks the run to stop. The workflow answers every open tool call
// (a call that was running gets Interrupted, or its result if it finished;
// one that had not started gets NotRun; a call waiting for approval is
// denied) and ends cancelled; Result then returns a *CancelledError.
func (h *Handle) Cancel(ctx context.Context) error {
	return h.c.CancelWorkflow(ctx, h.WorkflowID, "")
}

// Approve sends decisions for calls awaiting approval (the UpdateApprove
// update) and returns once the workflow accepted or rejected them. Several
// Approve calls may each decide some of the calls; the run goes on when
// every call has a decision, or one aborts the run.
//
// It is idempotent: the update id is derived from the decisions, so
// sending the same decisions again (a retry after a lost answer) returns
// the first outcome without applying anything twice. Decisions for calls
// that do not wait for approval, that were decided already (stale or
// duplicate decisions), or that are malformed, are refused with a
// *RejectedError and change nothing.
func (h *Handle) Approve(ctx context.Context, decisions []run.Decision) (ApprovalResult, error) {
	var res ApprovalResult
	data, err := json.Marshal(decisions)
	if err != nil {
		return res, err
	}
	sum := sha256.Sum256(data)
	uh, err := h.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   h.WorkflowID,
		UpdateID:     "approve-" + hex.EncodeToString(sum[:16]),
		UpdateName:   UpdateApprove,
		Args:         []any{decisions},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return res, decodeError(err)
	}
	return res, decodeError(uh.Get(ctx, &res))
}

// Approve sends decisions to the run with workflow id id: see
// Handle.Approve. It is what `loom approve RUN_ID ...` calls.
func Approve(ctx context.Context, c client.Client, id string, decisions []run.Decision) (ApprovalResult, error) {
	return Attach(c, id).Approve(ctx, decisions)
}

// ProgressOptions configure Handle.Progress. The zero value (or nil)
// starts at the first event and polls every 250 ms.
type ProgressOptions struct {
	// After skips events up to this Seq (to resume a stream).
	After int64
	// Interval is the wait between polls when nothing is new.
	Interval time.Duration
}

// Progress streams the run's events: it polls the QueryEvents query
// (queries add nothing to the workflow's history) and yields each event
// once, in order, until a terminal one (EventDone, EventFailed,
// EventCancelled), after which it ends. If the run ends while no worker
// can answer the query, the terminal event is made from the run's result.
// An error is yielded last: ctx ended, or the server failed.
//
// Events come from the workflow's memory, which keeps the latest few
// hundred (and carries a few dozen over continue-as-new): a consumer that
// falls far behind sees a gap in Seq. The sequence is single use.
func (h *Handle) Progress(ctx context.Context, opts *ProgressOptions) iter.Seq2[Event, error] {
	var o ProgressOptions
	if opts != nil {
		o = *opts
	}
	if o.Interval <= 0 {
		o.Interval = 250 * time.Millisecond
	}
	return func(yield func(Event, error) bool) {
		after := o.After
		for {
			page, closed, err := h.events(ctx, after)
			if err != nil {
				if ctx.Err() != nil {
					yield(Event{}, ctx.Err())
					return
				}
				if e, ok := h.ended(ctx, after); ok {
					yield(e, nil)
					return
				}
				yield(Event{}, err)
				return
			}
			for _, e := range page.Events {
				if e.Seq <= after {
					continue
				}
				after = e.Seq
				if !yield(e, nil) || e.Kind.Terminal() {
					return
				}
			}
			if closed {
				// Closed without a terminal event (terminated, timed
				// out): end with one made from the result.
				if e, ok := h.ended(ctx, after); ok {
					yield(e, nil)
				} else {
					yield(Event{}, errClosed)
				}
				return
			}
			if len(page.Events) > 0 {
				continue
			}
			t := time.NewTimer(o.Interval)
			select {
			case <-ctx.Done():
				t.Stop()
				yield(Event{}, ctx.Err())
				return
			case <-t.C:
			}
		}
	}
}

func (h *Handle) events(ctx context.Context, after int64) (page EventPage, closed bool, err error) {
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := h.c.QueryWorkflowWithOptions(qctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: h.WorkflowID, QueryType: QueryEvents, Args: []any{after},
		QueryRejectCondition: enumspb.QUERY_REJECT_CONDITION_NOT_OPEN,
	})
	if err == nil && resp.QueryRejected != nil {
		// Closed: its last events are still worth a try.
		cctx, cancel := context.WithTimeout(ctx, closedQueryTimeout)
		defer cancel()
		v, err := h.c.QueryWorkflow(cctx, h.WorkflowID, "", QueryEvents, after)
		if err != nil {
			return page, true, errClosed
		}
		return page, true, v.Get(&page)
	}
	if err != nil {
		return page, false, fmt.Errorf("temporal: events of %s: %w", h.WorkflowID, err)
	}
	return page, false, resp.QueryResult.Get(&page)
}

// closedQueryTimeout bounds the wait for a worker to answer a query on a
// closed run.
const closedQueryTimeout = 5 * time.Second

var errClosed = errors.New("temporal: the run is closed and no worker answered its query")

// ended returns the terminal event of a run that is closed, made from its
// result.
func (h *Handle) ended(ctx context.Context, after int64) (Event, bool) {
	d, err := h.c.DescribeWorkflowExecution(ctx, h.WorkflowID, "")
	if err != nil || d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return Event{}, false
	}
	resp, err := h.Result(ctx)
	e := Event{Seq: after + 1}
	switch {
	case err == nil:
		e.Kind, e.Text, e.Usage = EventDone, preview(resp.Output), resp.Usage
	case isCancelled(err):
		e.Kind = EventCancelled
	default:
		e.Kind, e.Error = EventFailed, err.Error()
	}
	return e, true
}

func isCancelled(err error) bool {
	_, ok := err.(*CancelledError)
	return ok
}
