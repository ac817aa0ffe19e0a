package temporal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/tool"
)

// Texts the model reads for tool calls the workflow could not run to the
// end.
const (
	// Interrupted answers a call whose tool was running when the run was
	// cancelled.
	Interrupted = "Tool call interrupted: the run was cancelled while the tool was running, so it may have partly run."
	// NotRun answers a call that had not started when the run was
	// cancelled.
	NotRun = "Tool call not run: the run was cancelled before it started."
	// WorkerLost answers a call of a tool that is not safe to repeat
	// whose worker stopped while it ran: it is not run a second time.
	WorkerLost = "Tool call interrupted: the worker running it stopped before it finished, and the tool is not safe to repeat, so it was not run again; it may have partly run. Check its effects before calling it again."
)

// CallInfo identifies a tool call made by the workflow. The tool's
// context carries it (see CallInfoFrom).
type CallInfo struct {
	WorkflowID string
	Turn       int
	CallID     string
	// Attempt is the activity attempt, from 1. A tool that is safe to
	// repeat may see attempts above 1 after a worker died.
	Attempt int32
	// Key is "WorkflowID/Turn/CallID", the same on every attempt: an
	// idempotency key for whatever the tool does to the outside world.
	Key string
}

type callInfoKey struct{}

// CallInfoFrom returns the CallInfo of the tool call ctx belongs to, when
// the call runs in a workflow's tool activity.
//
// Activities run at least once: a worker that dies after the tool's effect
// and before Temporal recorded the result leaves a call that Temporal
// retries. The workflow does not run a tool that is not safe to repeat a
// second time when an earlier attempt had started it (the call is answered
// with WorkerLost), but a tool whose effect must happen exactly once should
// pass Key to the service it calls (as an idempotency key) or record it
// alongside the effect.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return ci, ok
}

// Registry is what a worker can run: models and tools by name, and the
// blob store the workers of a task queue share.
type Registry struct {
	// Models by the name Input.Model uses. Temporal retries model calls
	// (Options.ModelRetry), so the activity calls them under
	// model.WithoutRetry: a model wrapped in model.Retry makes one attempt
	// per activity attempt, and every attempt shows in the workflow's
	// history.
	Models map[string]model.Model
	// Tools are the tools Input.Tools may name. Nil means none.
	Tools *tool.Set
	// Blobs is the store for transcripts and the images of tool results;
	// nil means a MemoryBlobs of this process. See Blobs for when it must
	// be shared and durable. With a MemoryBlobs, images of tool results
	// stay inline (the store is only a cache then); with any other store
	// they go by reference, and it must keep them and be shared by the
	// workers.
	Blobs Blobs
	// CacheBytes bounds the worker's cache of blobs (default 64 MiB).
	CacheBytes int64
}

// activities are the workflow's activities, bound to a Registry. They are
// safe for concurrent use.
type activities struct {
	models map[string]model.Model
	tools  *tool.Set
	res    resolver
	// imageRefs is whether tool results' images go by reference: not with
	// a MemoryBlobs, which loses them with the process and is not shared.
	imageRefs bool
}

func newActivities(reg Registry) (*activities, error) {
	if len(reg.Models) == 0 {
		return nil, errors.New("temporal: the Registry has no models")
	}
	for name, m := range reg.Models {
		if m == nil {
			return nil, fmt.Errorf("temporal: the Registry's model %q is nil", name)
		}
	}
	store := reg.Blobs
	if store == nil {
		store = &MemoryBlobs{}
	}
	size := reg.CacheBytes
	if size <= 0 {
		size = 64 << 20
	}
	tools := reg.Tools
	if tools == nil {
		tools = &tool.Set{}
	}
	_, inMemory := store.(*MemoryBlobs)
	return &activities{models: reg.Models, tools: tools, res: resolver{cache: newBlobCache(store, size)}, imageRefs: !inMemory}, nil
}

// heartbeat records a heartbeat with details every third of the
// activity's heartbeat timeout until stop is called, so that a worker that
// dies is noticed within that timeout while a slow call that is alive is
// not.
func heartbeat(ctx context.Context, details ...any) (stop func()) {
	every := activity.GetInfo(ctx).HeartbeatTimeout / 3
	if every <= 0 {
		return func() {}
	}
	every = max(every, 10*time.Millisecond)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, details...)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// modelInput is the model activity's argument: the request without its
// messages and tools, which travel as references (see transcript.go).
type modelInput struct {
	Model      string        `json:"model"`
	Turn       int           `json:"turn"`
	Request    llm.Request   `json:"request"`
	Tools      *blobRef      `json:"tools,omitempty"`
	Transcript transcriptRef `json:"transcript"`
}

// modelOutput is the model activity's result.
type modelOutput struct {
	Response llm.Response `json:"response"`
	// AnswerKey is the key under which the answer's message was stored,
	// empty when it was not.
	AnswerKey string `json:"answer_key,omitempty"`
	// Approvals says, for the answer's calls of tools whose need for
	// approval depends on the arguments, whether they need it: asked here
	// because the tools live on the worker, and now saves an activity.
	Approvals []callApproval `json:"approvals,omitempty"`
}

// callApproval is a tool's verdict on one call: does it need a decision.
type callApproval struct {
	Call  llm.ToolCall `json:"call"`
	Needs bool         `json:"needs"`
}

func missingError(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrorTypeBlobsMissing, nil)
}

// storeError classifies an error of the blob store: a missing blob is
// for the workflow to handle, anything else is retried.
func storeError(err error) error {
	if errors.Is(err, errMissing) {
		return missingError(err)
	}
	return err
}

// Model calls a model: it assembles the transcript from the store and the
// input, calls Generate, and stores the answer.
func (a *activities) Model(ctx context.Context, in modelInput) (modelOutput, error) {
	m, ok := a.models[in.Model]
	if !ok {
		return modelOutput{}, appError(fmt.Sprintf("no model %q on this worker", in.Model), ErrorTypeInput, InputError{Field: "Model", Reason: fmt.Sprintf("no model %q in the worker's Registry", in.Model)})
	}
	stop := heartbeat(ctx)
	defer stop()
	msgs, err := a.res.transcript(ctx, in.Transcript)
	if err != nil {
		return modelOutput{}, storeError(err)
	}
	tools, err := a.res.tools(ctx, in.Tools)
	if err != nil {
		return modelOutput{}, storeError(err)
	}
	// The model gets images as bytes: put back those sent by reference.
	if msgs, err = resolveImages(ctx, a.res.cache.get, msgs); err != nil {
		return modelOutput{}, activityImagesError(err)
	}
	req := in.Request
	req.Messages, req.Tools = msgs, tools
	resp, err := m.Generate(model.WithoutRetry(ctx), req)
	if err != nil {
		return modelOutput{}, modelFailure(err)
	}
	if resp.Truncated {
		return modelOutput{}, modelFailure(&model.Error{Kind: model.KindTruncatedStream, Op: "temporal: model activity", Message: "the answer ended before the provider's end marker"})
	}
	// The provider's raw body would double the answer's size in the
	// workflow's history and is never needed to interpret it.
	resp.Raw = nil
	out := modelOutput{Response: resp}
	for _, c := range resp.ToolCalls() {
		if t, ok := a.tools.Lookup(c.Name); ok {
			if _, ok := t.(tool.Approvable); ok {
				out.Approvals = append(out.Approvals, callApproval{Call: c, Needs: tool.NeedsApproval(t, c.Args())})
			}
		}
	}
	if !resp.Message.IsEmpty() {
		if key, data, err := messageKey(resp.Message); err == nil && a.res.cache.put(ctx, key, data) == nil {
			out.AnswerKey = key
		}
	}
	return out, nil
}

// toolInput is the tool activity's argument.
type toolInput struct {
	Call   llm.ToolCall `json:"call"`
	Effect llm.Effect   `json:"effect,omitempty"`
	Turn   int          `json:"turn"`
	Key    string       `json:"key"`
}

// toolIntent is the tool activity's heartbeat: recorded before the tool
// starts, it tells a later attempt that the tool may have run.
type toolIntent struct {
	Key     string `json:"key"`
	Started bool   `json:"started"`
}

// Tool runs one tool call.
//
// Before the tool starts, the activity records a heartbeat saying so; the
// SDK sends the first heartbeat of an attempt at once, so the record is on
// the server before the tool runs. A later attempt that finds it (the
// worker died, or the attempt timed out) does not run a tool that is not
// safe to repeat again and answers WorkerLost instead.
// toolOutput is the tool activity's result.
type toolOutput struct {
	Result llm.ToolResult `json:"result"`
	// ContentKey is the key under which the result's content was stored
	// (empty when it was not), so the next model call can name it.
	ContentKey string `json:"content_key,omitempty"`
}

func (a *activities) Tool(ctx context.Context, in toolInput) (toolOutput, error) {
	info := activity.GetInfo(ctx)
	if info.Attempt > 1 && activity.HasHeartbeatDetails(ctx) {
		var prev toolIntent
		if activity.GetHeartbeatDetails(ctx, &prev) == nil && prev.Started && !in.Effect.SafeToRepeat() {
			activity.GetLogger(ctx).Warn("not repeating a tool call that may have run", "tool", in.Call.Name, "call", in.Call.ID, "attempt", info.Attempt)
			return toolOutput{Result: llm.ToolResult{CallID: in.Call.ID, Name: in.Call.Name, Content: WorkerLost, IsError: true}}, nil
		}
	}
	intent := toolIntent{Key: in.Key, Started: true}
	activity.RecordHeartbeat(ctx, intent)
	stop := heartbeat(ctx, intent)
	defer stop()
	cctx := context.WithValue(ctx, callInfoKey{}, CallInfo{
		WorkflowID: info.WorkflowExecution.ID, Turn: in.Turn, CallID: in.Call.ID, Attempt: info.Attempt, Key: in.Key,
	})
	res, err := a.tools.Call(cctx, in.Call)
	if ctx.Err() != nil {
		// Cancelled: report what the tool said, as the details of a
		// cancellation, so the workflow knows it was cut short. The
		// workflow reads only the content: images would only weigh on
		// the payload.
		res.Images = nil
		return toolOutput{}, temporal.NewCanceledError(res)
	}
	if err != nil {
		info := toolErrorInfo{Name: in.Call.Name, CallID: in.Call.ID, Message: err.Error()}
		return toolOutput{}, appError((&ToolError{Name: info.Name, CallID: info.CallID, Message: info.Message}).Error(), ErrorTypeTool, info)
	}
	res.CallID, res.Name = in.Call.ID, in.Call.Name
	// Large images go by reference (see images.go), so that the result
	// and the model calls after it stay small.
	res.Images = a.refImages(ctx, res.Images)
	out := toolOutput{Result: res}
	if len(res.Content) >= minContentRef {
		key := contentKey(res.Content)
		if a.res.cache.put(ctx, key, []byte(res.Content)) == nil {
			out.ContentKey = key
		}
	}
	return out, nil
}

// describeInput is the describe activity's argument.
type describeInput struct {
	Model string   `json:"model"`
	Tools []string `json:"tools,omitempty"`
}

// describeOutput is the describe activity's result.
type describeOutput struct {
	Specs []llm.ToolSpec `json:"specs"`
	// ByArguments names the tools whose need for approval depends on a
	// call's arguments (tool.Approvable): their specs say they need it,
	// and the workflow asks the worker about each call.
	ByArguments []string `json:"by_arguments,omitempty"`
}

// Describe checks that the worker has the model and the tools a run
// names, and returns the tools' specs.
func (a *activities) Describe(_ context.Context, in describeInput) (describeOutput, error) {
	var out describeOutput
	if _, ok := a.models[in.Model]; !ok {
		ie := InputError{Field: "Model", Reason: fmt.Sprintf("no model %q in the worker's Registry", in.Model)}
		return out, appError(ie.Error(), ErrorTypeInput, ie)
	}
	out.Specs = make([]llm.ToolSpec, 0, len(in.Tools))
	for _, name := range in.Tools {
		t, ok := a.tools.Lookup(name)
		if !ok {
			ie := InputError{Field: "Tools", Reason: fmt.Sprintf("no tool %q in the worker's Registry (it has %v)", name, a.tools.Names())}
			return out, appError(ie.Error(), ErrorTypeInput, ie)
		}
		spec := t.Spec()
		if _, ok := t.(tool.Approvable); ok {
			// As in-process: the machine asks by spec, and the calls
			// whose arguments need none are approved on the spot.
			spec.NeedsApproval = true
			out.ByArguments = append(out.ByArguments, name)
		}
		out.Specs = append(out.Specs, spec)
	}
	return out, nil
}

// NeedsApproval reports, for each call, whether its tool needs a decision
// for its arguments (tool.NeedsApproval).
func (a *activities) NeedsApproval(_ context.Context, calls []llm.ToolCall) ([]bool, error) {
	out := make([]bool, len(calls))
	for i, c := range calls {
		t, ok := a.tools.Lookup(c.Name)
		out[i] = !ok || tool.NeedsApproval(t, c.Args())
	}
	return out, nil
}

// loadInput is the load activity's argument.
type loadInput struct {
	Keys     []string `json:"keys"`
	MaxBytes int      `json:"max_bytes"`
}

// Load returns the messages stored under a prefix of Keys whose encoded
// size stays within MaxBytes (at least one message).
func (a *activities) Load(ctx context.Context, in loadInput) ([]llm.Message, error) {
	var (
		out  []llm.Message
		size int
	)
	for _, key := range in.Keys {
		data, err := a.res.cache.get(ctx, key)
		if errors.Is(err, ErrBlobNotFound) {
			return nil, missingError(fmt.Errorf("%w: message %s: %v", errMissing, key, err))
		}
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && size+len(data) > in.MaxBytes {
			break
		}
		m, err := a.res.message(ctx, key)
		if err != nil {
			return nil, storeError(err)
		}
		out = append(out, m)
		size += len(data)
	}
	return out, nil
}
