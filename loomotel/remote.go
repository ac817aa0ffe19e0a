package loomotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
)

// RemoteRun is the span of a run that another process drives: a run
// started on Temporal, say, whose workflow and activities run in workers.
// Make one with StartRemoteRun and end it with End.
type RemoteRun struct {
	c     *config
	span  trace.Span
	ended bool
}

// StartRemoteRun starts a span of kind CLIENT named
// "invoke_agent {agent name}" (see WithAgentName) for a run another
// process drives, and returns a context carrying it. Pass that context to
// the call that starts the run; with context propagation (for Temporal,
// the tracing interceptor of go.temporal.io/sdk/contrib/opentelemetry),
// the spans the workers make for the run become its descendants.
//
// The span carries gen_ai.operation.name "invoke_agent",
// gen_ai.agent.name, gen_ai.provider.name, gen_ai.conversation.id (see
// WithConversationID) and loom.run.id runID (left out when empty).
func StartRemoteRun(ctx context.Context, runID string, opts ...Option) (context.Context, *RemoteRun) {
	c := newConfig(opts)
	name, attrs := c.runSpan(c.conversation, runID)
	ctx, span := c.tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, &RemoteRun{c: c, span: span}
}

// End ends the span of a run that used usage (its token totals, the
// zero llm.Usage when unknown) and ended with err: nil for a completed
// run, an *agent.SuspendedError for one waiting for approval (not an
// error, loom.run.suspended), anything else for a failure (status Error
// and error.type as for Run). Calls after the first do nothing; End is
// not safe for concurrent use.
func (r *RemoteRun) End(usage llm.Usage, err error) {
	if r.ended {
		return
	}
	r.ended = true
	r.span.SetAttributes(usageAttrs(usage, r.c.provider)...)
	var suspended *agent.SuspendedError
	switch {
	case err == nil:
	case errors.As(err, &suspended):
		r.span.SetAttributes(SuspendedKey.Bool(true))
	default:
		fail(r.span, err)
	}
	r.span.End()
}
