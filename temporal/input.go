package temporal

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
)

// Names under which the workflow, its activities, its query and its update
// are registered. They are part of the contract between clients, workers
// and recorded histories: renaming one breaks running workflows.
const (
	WorkflowName     = "loom.Run"
	ActivityModel    = "loom.model"
	ActivityTool     = "loom.tool"
	ActivityDescribe = "loom.describe"
	ActivityApproval = "loom.needs_approval"
	ActivityLoad     = "loom.load"
	QueryStatus      = "loom.status"
	QueryEvents      = "loom.events"
	QueryMessages    = "loom.messages"
	UpdateApprove    = "loom.approve"
	DefaultQueue     = "loom"
	defaultCarryMax  = 1 << 20
)

// Input starts a run: which model and tools of the workers' Registry to
// use, the machine's config, and the durable-execution options. It is the
// workflow's argument, so it is plain JSON-encodable data; keep it small
// (Run.Input, the earlier conversation, travels in it).
type Input struct {
	// Model names a model of the Registry.
	Model string `json:"model"`
	// Tools names the Registry tools the run may use, in the order they
	// are advertised. Their specs come from the Registry when the run
	// starts and are then fixed for the run.
	Tools []string `json:"tools,omitempty"`
	// Run is the machine's config. Its Tools must be empty: name the tools
	// in Input.Tools instead.
	Run run.Config `json:"run"`
	// Options tune timeouts, retries and history bounds; zero is the
	// default.
	Options Options `json:"options,omitzero"`
	// Resume is set by the workflow when it continues as new; leave it
	// nil.
	Resume *Continuation `json:"resume,omitempty"`
}

// Options tune how the workflow drives a run. The zero value is the
// default described on each field.
type Options struct {
	// ModelTimeout bounds one attempt of a model call (default 10 min).
	ModelTimeout time.Duration `json:"model_timeout,omitempty"`
	// ModelHeartbeat is how soon a model call on a dead worker is given up
	// and retried elsewhere (default 1 min).
	ModelHeartbeat time.Duration `json:"model_heartbeat,omitempty"`
	// ModelRetry is the retry policy of model calls. The default starts
	// at 1 s, doubles up to 1 min and gives up after 8 attempts. Failures
	// whose Kind retrying cannot fix (auth, bad request, quota, ...) are
	// never retried, and a provider's retry-after sets the next delay.
	ModelRetry *temporal.RetryPolicy `json:"model_retry,omitempty"`

	// ToolTimeout bounds one attempt of a tool call (default 10 min).
	ToolTimeout time.Duration `json:"tool_timeout,omitempty"`
	// ToolHeartbeat is how soon a tool call on a dead worker is noticed
	// (default 30 s). The activity heartbeats at a third of it while the
	// tool runs.
	ToolHeartbeat time.Duration `json:"tool_heartbeat,omitempty"`
	// ToolRetry is the retry policy of tool calls (default: 1 s doubling,
	// 3 attempts). A retried call of a tool that is not safe to repeat,
	// whose earlier attempt had started, is not run again: it is answered
	// with Interrupted.
	ToolRetry *temporal.RetryPolicy `json:"tool_retry,omitempty"`
	// ParallelTools bounds how many read-only calls of one turn run at
	// once (default 4). Other calls run one at a time, in call order.
	ParallelTools int `json:"parallel_tools,omitempty"`

	// ApprovalTimeout, when positive, denies the calls still undecided
	// that long after the run asked for approval; zero waits for ever.
	ApprovalTimeout time.Duration `json:"approval_timeout,omitempty"`

	// The workflow continues as new, before a model call, once the
	// server suggests it, or its history reaches HistoryBytes (default
	// 4 MiB) or HistoryEvents (default 4,000), or it made TurnsPerRun
	// model calls (default: no limit). Negative disables a bound.
	HistoryBytes  int `json:"history_bytes,omitempty"`
	HistoryEvents int `json:"history_events,omitempty"`
	TurnsPerRun   int `json:"turns_per_run,omitempty"`
	// InlineCarryBytes is the largest run snapshot carried into the next
	// run inline (default 1 MiB); a larger one is carried as references
	// to messages in the blob store, which must then be durable and shared.
	InlineCarryBytes int `json:"inline_carry_bytes,omitempty"`
	// ResultBytes is the largest size of the run's messages returned in
	// the workflow's result (default 1 MiB); larger, they are left out
	// and Handle.Result fetches them with queries.
	ResultBytes int `json:"result_bytes,omitempty"`
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.ModelTimeout, 10*time.Minute)
	def(&o.ModelHeartbeat, time.Minute)
	def(&o.ToolTimeout, 10*time.Minute)
	def(&o.ToolHeartbeat, 30*time.Second)
	if o.ModelRetry == nil {
		o.ModelRetry = &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 8}
	}
	if o.ToolRetry == nil {
		o.ToolRetry = &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 3}
	}
	if o.ParallelTools <= 0 {
		o.ParallelTools = 4
	}
	if o.HistoryBytes == 0 {
		o.HistoryBytes = 4 << 20
	}
	if o.HistoryEvents == 0 {
		o.HistoryEvents = 4000
	}
	if o.ResultBytes <= 0 {
		o.ResultBytes = 1 << 20
	}
	if o.InlineCarryBytes <= 0 {
		o.InlineCarryBytes = defaultCarryMax
	}
	return o
}

// Validate returns an *InputError when in cannot start a run. Start calls
// it; the workflow calls it again.
func (in Input) Validate() error {
	if in.Resume != nil {
		return nil
	}
	if in.Model == "" {
		return &InputError{Field: "Model", Reason: "empty; name a model of the workers' Registry"}
	}
	if len(in.Run.Tools) > 0 {
		return &InputError{Field: "Run.Tools", Reason: "tool specs come from the workers' Registry; name the tools in Input.Tools instead"}
	}
	seen := make(map[string]bool, len(in.Tools))
	for _, name := range in.Tools {
		if seen[name] {
			return &InputError{Field: "Tools", Reason: fmt.Sprintf("%q is named twice", name)}
		}
		seen[name] = true
	}
	if err := checkImageRefs("Run.Prompt", []llm.Message{in.Run.Prompt}); err != nil {
		return err
	}
	return checkImageRefs("Run.Input", in.Run.Input)
}

// Continuation is what a run carries into the next run of its workflow
// when it continues as new (Input.Resume). The workflow writes and reads
// it; its content is opaque and may change between versions of this
// package.
type Continuation struct {
	state carryState
}

// MarshalJSON encodes the carried state.
func (c Continuation) MarshalJSON() ([]byte, error) { return json.Marshal(c.state) }

// UnmarshalJSON decodes the carried state.
func (c *Continuation) UnmarshalJSON(data []byte) error { return json.Unmarshal(data, &c.state) }

// carryState is the content of a Continuation.
type carryState struct {
	// Snapshot is the run's snapshot, when carried inline.
	Snapshot json.RawMessage `json:"snapshot,omitempty"`
	// Skeleton is the snapshot without its messages, which are in
	// Messages (input first, then the run's own), when carried by
	// reference.
	Skeleton json.RawMessage `json:"skeleton,omitempty"`
	InputLen int             `json:"input_len,omitempty"`
	Messages []msgRef        `json:"messages,omitempty"`

	Transcript     transcriptState `json:"transcript,omitzero"`
	ByArguments    []string        `json:"by_arguments,omitempty"`
	InvalidRetries int             `json:"invalid_retries,omitempty"`
	Runs           int             `json:"runs"`
	Events         []Event         `json:"events,omitempty"`
	NextSeq        int64           `json:"next_seq"`
}
