package loomotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

// Attributes of loom's own, for what the GenAI conventions have no name for.
const (
	// EffectKey is the effect class of a tool (llm.Effect.String():
	// "read_only", "idempotent" or "destructive") on execute_tool spans.
	EffectKey = attribute.Key("loom.tool.effect")
	// IdempotencyKeyKey is agent.IdempotencyKey of a tool call, on
	// execute_tool spans of calls made by an agent.
	IdempotencyKeyKey = attribute.Key("loom.tool.idempotency_key")
	// RunIDKey is the run's id, on invoke_agent spans.
	RunIDKey = attribute.Key("loom.run.id")
	// TurnsKey is the number of model calls that answered in the run
	// (the last turn number of the run), on invoke_agent spans.
	TurnsKey = attribute.Key("loom.run.turns")
	// SuspendedKey is true on an invoke_agent span whose run was suspended
	// for approval (agent.SuspendedError); such a span is not an error.
	SuspendedKey = attribute.Key("loom.run.suspended")
	// ResumedKey is true on an invoke_agent span of a run continued by
	// Resume or ResumeStream.
	ResumedKey = attribute.Key("loom.run.resumed")
	// AbandonedKey is true on a span of a stream whose consumer stopped
	// ranging it before it ended; such a span is not an error.
	AbandonedKey = attribute.Key("loom.stream.abandoned")
)

// Values of error.type that are not a model.Kind or a Go type name.
const (
	// ErrorTypeToolError marks an execute_tool span whose tool returned a
	// result with IsError set.
	ErrorTypeToolError = "tool_error"
	// ErrorTypePanic marks a span whose operation panicked.
	ErrorTypePanic = "panic"
	// ErrorTypeCanceled marks an operation whose context was cancelled.
	ErrorTypeCanceled = "canceled"
)

// errorType is the error.type of err: the model.Kind of the *model.Error
// in its chain; "canceled" or "timeout" for an ended context; else the Go
// type of err (of the cause, for an *agent.RunError or a fmt.Errorf
// wrapper), as semconv.ErrorType spells it.
func errorType(err error) string {
	if k := model.KindOf(err); k != "" {
		return string(k)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return ErrorTypeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return string(model.KindTimeout)
	}
	for {
		re, ok := err.(*agent.RunError)
		if !ok || re.Err == nil {
			break
		}
		err = re.Err
	}
	return semconv.ErrorType(err).Value.AsString()
}

// fail marks span as failed with err.
func fail(span trace.Span, err error) {
	span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// panicked marks span as ended by a panic with value v, nil when the
// value is not known (the panic was not recovered here).
func panicked(span trace.Span, v any) {
	span.SetAttributes(semconv.ErrorTypeKey.String(ErrorTypePanic))
	if v == nil {
		span.SetStatus(codes.Error, "panic")
		return
	}
	msg := fmt.Sprintf("panic: %v", v)
	span.AddEvent("exception", trace.WithAttributes(
		semconv.ExceptionType(ErrorTypePanic),
		semconv.ExceptionMessage(msg),
	))
	span.SetStatus(codes.Error, msg)
}

// usageAttrs returns the gen_ai.usage.* attributes of u, leaving out the
// counts that are zero (reported as zero, or not reported).
func usageAttrs(u llm.Usage, provider string) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if n := inputTokens(u, provider); n != 0 {
		attrs = append(attrs, semconv.GenAIUsageInputTokensKey.Int64(n))
	}
	if u.OutputTokens != 0 {
		attrs = append(attrs, semconv.GenAIUsageOutputTokensKey.Int64(u.OutputTokens))
	}
	if u.CacheReadTokens != 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokensKey.Int64(u.CacheReadTokens))
	}
	if u.CacheWriteTokens != 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheCreationInputTokensKey.Int64(u.CacheWriteTokens))
	}
	if u.ReasoningTokens != 0 {
		attrs = append(attrs, semconv.GenAIUsageReasoningOutputTokensKey.Int64(u.ReasoningTokens))
	}
	return attrs
}

// inputTokens is gen_ai.usage.input_tokens: every input token, cached ones
// included, which is what llm.Usage.InputTokens counts for every adapter.
func inputTokens(u llm.Usage, _ string) int64 {
	return u.InputTokens
}
