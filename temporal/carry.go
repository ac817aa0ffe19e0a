package temporal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
)

// loadPageBytes bounds one load activity's result.
const loadPageBytes = 1 << 20

// continueAsNew ends this workflow run and starts the next with the run's
// state carried over.
func (w *runner) continueAsNew() (Result, error) {
	c, err := w.carry()
	if err != nil {
		return w.fail(err)
	}
	next := Input{Model: w.in.Model, Tools: w.in.Tools, Options: w.in.Options, Resume: &Continuation{state: *c}}
	return Result{}, workflow.NewContinueAsNewError(w.ctx, WorkflowName, next)
}

// carry returns what the next run needs: the run's snapshot inline when it
// is small, else its skeleton with the messages by key where the store
// holds them.
func (w *runner) carry() (*carryState, error) {
	snap, err := json.Marshal(w.r)
	if err != nil {
		return nil, err
	}
	c := &carryState{
		Transcript:     w.ts,
		ByArguments:    w.byArgs,
		InvalidRetries: w.invalidRetries,
		Runs:           w.runs,
		Events:         w.events.tail(),
		NextSeq:        w.events.next,
	}
	if len(snap) <= w.opts.InlineCarryBytes {
		c.Snapshot = snap
		return c, nil
	}
	skeleton, err := splitSnapshot(snap)
	if err != nil {
		// A snapshot this package cannot take apart is carried whole.
		workflow.GetLogger(w.ctx).Warn("carrying the run snapshot inline", "error", err, "bytes", len(snap))
		c.Snapshot = snap
		return c, nil
	}
	hist := w.r.History()
	c.Skeleton, c.InputLen = skeleton, len(w.r.Config().Input)
	c.Messages = make([]msgRef, len(hist))
	for i := range hist {
		key, _, err := messageKey(hist[i])
		if err != nil {
			return nil, err
		}
		if i < w.ts.BaseLen || w.ts.known(key) {
			c.Messages[i] = msgRef{Key: key}
		} else {
			c.Messages[i] = msgRef{Msg: &hist[i]}
		}
	}
	return c, nil
}

// splitSnapshot returns a format 1 run snapshot without its messages: the
// config's input and the run's messages are emptied.
func splitSnapshot(snap []byte) (json.RawMessage, error) {
	top, cfg, err := openSnapshot(snap)
	if err != nil {
		return nil, err
	}
	delete(cfg, "input")
	if top["config"], err = json.Marshal(cfg); err != nil {
		return nil, err
	}
	top["messages"] = json.RawMessage("[]")
	return json.Marshal(top)
}

// joinSnapshot puts messages (input first, inputLen of them) back into a
// skeleton made by splitSnapshot.
func joinSnapshot(skeleton []byte, msgs []llm.Message, inputLen int) ([]byte, error) {
	top, cfg, err := openSnapshot(skeleton)
	if err != nil {
		return nil, err
	}
	if inputLen < 0 || inputLen > len(msgs) {
		return nil, fmt.Errorf("carry: %d input messages of %d", inputLen, len(msgs))
	}
	if inputLen > 0 {
		if cfg["input"], err = json.Marshal(msgs[:inputLen]); err != nil {
			return nil, err
		}
	}
	if top["config"], err = json.Marshal(cfg); err != nil {
		return nil, err
	}
	own := msgs[inputLen:]
	if own == nil {
		own = []llm.Message{}
	}
	if top["messages"], err = json.Marshal(own); err != nil {
		return nil, err
	}
	return json.Marshal(top)
}

func openSnapshot(snap []byte) (top, cfg map[string]json.RawMessage, err error) {
	if err := json.Unmarshal(snap, &top); err != nil {
		return nil, nil, fmt.Errorf("carry: %w", err)
	}
	var format int
	if err := json.Unmarshal(top["format"], &format); err != nil || format != 1 {
		return nil, nil, fmt.Errorf("carry: snapshot format %s, want 1", bytes.TrimSpace(top["format"]))
	}
	if _, ok := top["messages"]; !ok {
		return nil, nil, errors.New("carry: the snapshot has no messages member")
	}
	if err := json.Unmarshal(top["config"], &cfg); err != nil || cfg == nil {
		return nil, nil, errors.New("carry: the snapshot has no config object")
	}
	return top, cfg, nil
}

// restore sets the run up from what the run before carried.
func (w *runner) restore(cont *Continuation) error {
	c := &cont.state
	w.ts = c.Transcript
	w.byArgs = c.ByArguments
	w.invalidRetries = c.InvalidRetries
	w.runs = c.Runs + 1
	w.events.events = append([]Event(nil), c.Events...)
	w.events.next = c.NextSeq
	snap := []byte(c.Snapshot)
	if len(snap) == 0 {
		msgs, err := w.load(c.Messages)
		if err != nil {
			return err
		}
		if snap, err = joinSnapshot(c.Skeleton, msgs, c.InputLen); err != nil {
			return err
		}
	}
	r := new(run.Run)
	if err := json.Unmarshal(snap, r); err != nil {
		return fmt.Errorf("carry: %w", err)
	}
	w.r = r
	w.emit(Event{Kind: EventContinued, Turn: r.Turn(), Usage: r.Usage()})
	return nil
}

// load fetches the messages refs name by key, a page per activity.
func (w *runner) load(refs []msgRef) ([]llm.Message, error) {
	var keys []string
	for _, ref := range refs {
		if ref.Msg == nil {
			keys = append(keys, ref.Key)
		}
	}
	actx := workflow.WithActivityOptions(w.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5, NonRetryableErrorTypes: []string{ErrorTypeBlobsMissing}},
	})
	loaded := make([]llm.Message, 0, len(keys))
	for len(loaded) < len(keys) {
		var page []llm.Message
		err := workflow.ExecuteActivity(actx, ActivityLoad, loadInput{Keys: keys[len(loaded):], MaxBytes: loadPageBytes}).Get(w.ctx, &page)
		if err != nil {
			var ae *temporal.ApplicationError
			if errors.As(err, &ae) && ae.Type() == ErrorTypeBlobsMissing {
				return nil, appError("the run continued with its messages in the blob store, which no longer holds them: "+ae.Message(), ErrorTypeBlobsMissing, nil)
			}
			return nil, err
		}
		if len(page) == 0 {
			return nil, errors.New("carry: the load activity returned no messages")
		}
		loaded = append(loaded, page...)
	}
	msgs := make([]llm.Message, len(refs))
	next := 0
	for i, ref := range refs {
		if ref.Msg != nil {
			msgs[i] = *ref.Msg
		} else {
			msgs[i] = loaded[next]
			next++
		}
	}
	return msgs, nil
}
