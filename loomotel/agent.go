package loomotel

import (
	"context"
	"errors"
	"iter"
	"slices"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
)

// Instrument returns cfg with Model appended to its ModelMiddleware and
// Tool to its ToolMiddleware, both made with opts. cfg's slices are not
// modified. Appended last, the model middleware is the innermost of cfg's
// (it sees the request as sent) and still outside the agent's retries; the
// tool middleware is the innermost too, so it traces the tool itself and
// not calls another middleware skips. Instrumenting a Config twice traces
// every call twice.
func Instrument(cfg agent.Config, opts ...Option) agent.Config {
	cfg.ModelMiddleware = append(slices.Clip(cfg.ModelMiddleware), Model(opts...))
	cfg.ToolMiddleware = append(slices.Clip(cfg.ToolMiddleware), Tool(opts...))
	return cfg
}

// Run runs a.Run(ctx, in) in a span of kind INTERNAL named
// "invoke_agent {agent name}" (see WithAgentName), and returns what it
// returns. The agent passes the span's context to its model and tool
// calls, so the spans of an agent made with Instrument are its children.
//
// The span carries gen_ai.operation.name "invoke_agent",
// gen_ai.agent.name, gen_ai.provider.name, gen_ai.conversation.id
// (Input.ConversationID), loom.run.id, loom.run.turns and the run's token
// totals (gen_ai.usage.*). A run that fails sets the status to Error and
// error.type as for model calls, seen through *agent.RunError (a run
// stopped by the model's failure has its model.Kind); a run suspended for
// approval is not an error but has loom.run.suspended. in.OnEvent still
// gets every event.
func Run(ctx context.Context, a *agent.Agent, in agent.Input, opts ...Option) (agent.Result, error) {
	return runUnary(ctx, newConfig(opts), startOf(in), func(ctx context.Context, on func(agent.Event)) (agent.Result, error) {
		in.OnEvent = on
		return a.Run(ctx, in)
	}, in.OnEvent)
}

// Stream is Run for a.Stream: the span starts when the sequence is ranged
// and ends once, when the run ends or fails, or when the consumer stops
// ranging before the run is done (then with loom.stream.abandoned; the
// agent cancels such a run).
func Stream(ctx context.Context, a *agent.Agent, in agent.Input, opts ...Option) iter.Seq2[agent.Event, error] {
	return runStream(ctx, newConfig(opts), startOf(in), func(ctx context.Context) iter.Seq2[agent.Event, error] {
		return a.Stream(ctx, in)
	})
}

// Resume runs a.Resume(ctx, res) in an invoke_agent span as Run does,
// with loom.run.resumed true and loom.run.id res.RunID (or the id the
// agent reports, for a Snapshot). A Resumption does not name the
// conversation: give it with WithConversationID to have
// gen_ai.conversation.id on the run's spans. The span's input messages
// (with WithContentCapture) are left out: the resumed run's messages are
// in its journal, not in res. loom.run.turns and the token totals are the
// run's, turns before the resumption included. res.OnEvent still gets
// every event.
func Resume(ctx context.Context, a *agent.Agent, res agent.Resumption, opts ...Option) (agent.Result, error) {
	return runUnary(ctx, newConfig(opts), runStart{runID: res.RunID, resumed: true}, func(ctx context.Context, on func(agent.Event)) (agent.Result, error) {
		res.OnEvent = on
		return a.Resume(ctx, res)
	}, res.OnEvent)
}

// ResumeStream is Resume for a.ResumeStream, with the span's life as in
// Stream.
func ResumeStream(ctx context.Context, a *agent.Agent, res agent.Resumption, opts ...Option) iter.Seq2[agent.Event, error] {
	return runStream(ctx, newConfig(opts), runStart{runID: res.RunID, resumed: true}, func(ctx context.Context) iter.Seq2[agent.Event, error] {
		return a.ResumeStream(ctx, res)
	})
}

// runStart is what a run's span knows when it starts.
type runStart struct {
	conversation string
	runID        string
	resumed      bool
	messages     []llm.Message // the input, for content capture
}

func startOf(in agent.Input) runStart {
	msgs := slices.Clone(in.History)
	if len(in.Prompt.Parts) > 0 {
		msgs = append(msgs, in.Prompt)
	}
	return runStart{conversation: in.ConversationID, runID: in.RunID, messages: msgs}
}

// runUnary traces do, a blocking run that reports its events to the
// function it is given; onEvent is the caller's observer.
func runUnary(ctx context.Context, c *config, st runStart, do func(context.Context, func(agent.Event)) (agent.Result, error), onEvent func(agent.Event)) (agent.Result, error) {
	ctx, r := c.startRun(ctx, st)
	defer func() {
		if v := recover(); v != nil {
			panicked(r.span, v)
			r.span.End()
			panic(v)
		}
	}()
	res, err := do(ctx, func(e agent.Event) {
		r.observe(e)
		if onEvent != nil {
			onEvent(e)
		}
	})
	r.end(res, err == nil, err)
	return res, err
}

// runStream traces the run seq returns when the result is ranged.
func runStream(ctx context.Context, c *config, st runStart, seq func(context.Context) iter.Seq2[agent.Event, error]) iter.Seq2[agent.Event, error] {
	return func(yield func(agent.Event, error) bool) {
		ctx, r := c.startRun(ctx, st)
		ended := false
		defer func() {
			if !ended { // a panic, in the run or in the consumer's loop
				panicked(r.span, nil)
				r.span.End()
			}
		}()
		var res agent.Result
		done := false
		for e, err := range seq(ctx) {
			if err != nil {
				ended = true
				r.end(res, false, err)
				yield(nil, err)
				return
			}
			r.observe(e)
			if d, ok := e.(agent.Done); ok {
				res, done = d.Result, true
			}
			if !yield(e, nil) {
				ended = true
				if !done {
					r.span.SetAttributes(AbandonedKey.Bool(true))
				}
				r.end(res, done, nil)
				return
			}
		}
		ended = true
		r.end(res, done, nil)
	}
}

// runInfo is what the spans inside a run learn from it through the
// context.
type runInfo struct {
	conversation string
	id           atomic.Pointer[string] // set once the run has an id
}

func (r *runInfo) runID() string {
	if p := r.id.Load(); p != nil {
		return *p
	}
	return ""
}

type runKey struct{}

func runFrom(ctx context.Context) *runInfo {
	r, _ := ctx.Value(runKey{}).(*runInfo)
	return r
}

// agentRun is one traced run; its methods are called on the goroutine
// driving the run (the agent delivers events there).
type agentRun struct {
	c       *config
	span    trace.Span
	info    *runInfo
	content bool
	turns   int
	total   llm.Usage
}

// runSpan returns the name and attributes of an invoke_agent span: the
// operation, provider, agent name, conversation and run id (the last two
// left out when empty).
func (c *config) runSpan(conversation, runID string) (string, []attribute.KeyValue) {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, semconv.GenAIOperationNameInvokeAgent)
	name := semconv.GenAIOperationNameInvokeAgent.Value.AsString()
	if c.provider != "" {
		attrs = append(attrs, semconv.GenAIProviderNameKey.String(c.provider))
	}
	if c.agentName != "" {
		attrs = append(attrs, semconv.GenAIAgentName(c.agentName))
		name += " " + c.agentName
	}
	if conversation != "" {
		attrs = append(attrs, semconv.GenAIConversationID(conversation))
	}
	if runID != "" {
		attrs = append(attrs, RunIDKey.String(runID))
	}
	return name, attrs
}

func (c *config) startRun(ctx context.Context, st runStart) (context.Context, *agentRun) {
	if st.conversation == "" {
		st.conversation = c.conversation
	}
	name, attrs := c.runSpan(st.conversation, st.runID)
	if st.resumed {
		attrs = append(attrs, ResumedKey.Bool(true))
	}
	ctx, span := c.tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	info := &runInfo{conversation: st.conversation}
	if st.runID != "" {
		info.id.Store(&st.runID)
	}
	r := &agentRun{c: c, span: span, info: info, content: c.content && span.IsRecording()}
	if r.content && len(st.messages) > 0 {
		if a, ok := messagesAttr(semconv.GenAIInputMessagesKey, messagesJSON(st.messages)); ok {
			span.SetAttributes(a)
		}
	}
	return context.WithValue(ctx, runKey{}, info), r
}

func (r *agentRun) observe(e agent.Event) {
	switch e := e.(type) {
	case agent.RunStarted:
		id := e.RunID
		r.info.id.Store(&id)
	case agent.Usage:
		r.turns = max(r.turns, e.Turn)
		r.total = e.Total
	}
}

// end ends the span of a run that completed (done, with res) or not.
func (r *agentRun) end(res agent.Result, done bool, err error) {
	var attrs []attribute.KeyValue
	if id := r.info.runID(); id != "" {
		attrs = append(attrs, RunIDKey.String(id))
	}
	if r.turns > 0 {
		attrs = append(attrs, TurnsKey.Int(r.turns))
	}
	usage := r.total
	if done {
		usage = res.Usage
	}
	attrs = append(attrs, usageAttrs(usage, r.c.provider)...)
	r.span.SetAttributes(attrs...)
	var suspended *agent.SuspendedError
	switch {
	case err == nil:
		if r.content && done {
			r.span.SetAttributes(outputContent(llm.Response{Message: res.Message, FinishReason: llm.FinishStop}))
		}
	case errors.As(err, &suspended):
		r.span.SetAttributes(SuspendedKey.Bool(true))
	default:
		fail(r.span, err)
	}
	r.span.End()
}
