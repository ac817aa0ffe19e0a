package loomotel

import (
	"context"
	"iter"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

// Bucket boundaries the conventions give for the two client metrics.
var (
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

// Model returns middleware that traces every call of a model with a span
// of kind CLIENT named "chat {request model}" ("chat" when the request
// names no model), and records the metrics gen_ai.client.operation.duration
// and gen_ai.client.token.usage.
//
// A span carries the request's settings (gen_ai.request.model, max_tokens,
// temperature, top_p, stop_sequences, stream, gen_ai.output.type "json"
// for a request with an output schema) and what came back
// (gen_ai.response.id, gen_ai.response.model, gen_ai.response.finish_reasons,
// gen_ai.usage.* including cache reads and writes and reasoning tokens).
// A Generate span ends when the call returns. A Stream span starts when
// the sequence is ranged and ends exactly once: when the stream ends, when
// it fails, or when the consumer stops ranging it (then loom.stream.abandoned
// is true and the span is not an error); the attributes of a stream's
// answer are folded from its events. A failed call sets the span's status
// to Error, records the error as an exception event and sets error.type to
// the error's model.Kind ("rate_limited", "timeout", ...), "canceled" for a
// cancelled context, or else the Go type of the error.
//
// In an agent (Config.ModelMiddleware, or Instrument) the middleware sits
// outside the agent's retries, so one span covers a call with all its
// retries, as the conventions ask. The returned middleware is safe for
// concurrent use.
func Model(opts ...Option) model.Middleware {
	c := newConfig(opts)
	t := c.tracer()
	ins := c.instruments()
	return func(next model.Model) model.Model {
		return &tracedModel{next: next, c: c, tracer: t, ins: ins}
	}
}

type instruments struct {
	duration metric.Float64Histogram
	tokens   metric.Int64Histogram
}

func (c *config) instruments() instruments {
	m := c.mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	d, err := genaiconv.NewClientOperationDuration(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		otel.Handle(err) // d is a no-op instrument then
	}
	t, err := genaiconv.NewClientTokenUsage(m, metric.WithExplicitBucketBoundaries(tokenBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	return instruments{duration: d.Inst(), tokens: t.Inst()}
}

type tracedModel struct {
	next   model.Model
	c      *config
	tracer trace.Tracer
	ins    instruments
}

// Generate traces one blocking call.
func (m *tracedModel) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	ctx, call := m.start(ctx, req, false)
	defer func() {
		if v := recover(); v != nil {
			call.endPanicked(ctx, v)
			panic(v)
		}
	}()
	resp, err := m.next.Generate(ctx, req)
	call.end(ctx, resp, err == nil, err)
	return resp, err
}

// Stream traces one streaming call, from the start of the range to the
// end of the stream.
func (m *tracedModel) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		ctx, call := m.start(ctx, req, true)
		var f fold
		if call.content {
			f.acc = new(llm.Accumulator)
		}
		ended := false
		defer func() {
			if !ended { // a panic, in the stream or in the consumer's loop
				call.endPanicked(ctx, nil)
			}
		}()
		for e, err := range m.next.Stream(ctx, req) {
			if err != nil {
				ended = true
				call.end(ctx, f.response(), false, err)
				yield(nil, err)
				return
			}
			if call.first.IsZero() {
				call.first = time.Now()
			}
			f.add(e)
			if !yield(e, nil) {
				ended = true
				call.abandon(ctx, f.response())
				return
			}
		}
		ended = true
		call.end(ctx, f.response(), f.finished, nil)
	}
}

// modelCall is one traced call; it is used by one goroutine.
type modelCall struct {
	m        *tracedModel
	span     trace.Span
	start    time.Time
	first    time.Time // the first event of a stream
	reqModel string
	stream   bool
	content  bool
}

func (m *tracedModel) start(ctx context.Context, req llm.Request, stream bool) (context.Context, *modelCall) {
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, semconv.GenAIOperationNameChat)
	if m.c.provider != "" {
		attrs = append(attrs, semconv.GenAIProviderNameKey.String(m.c.provider))
	}
	name := semconv.GenAIOperationNameChat.Value.AsString()
	if req.Model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(req.Model))
		name += " " + req.Model
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(req.MaxTokens))
	}
	if req.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperature(*req.Temperature))
	}
	if req.TopP != nil {
		attrs = append(attrs, semconv.GenAIRequestTopP(*req.TopP))
	}
	if len(req.Stop) > 0 {
		attrs = append(attrs, semconv.GenAIRequestStopSequences(req.Stop...))
	}
	attrs = append(attrs, semconv.GenAIRequestStream(stream))
	if req.Schema != nil {
		attrs = append(attrs, semconv.GenAIOutputTypeJSON)
	}
	if r := runFrom(ctx); r != nil && r.conversation != "" {
		attrs = append(attrs, semconv.GenAIConversationID(r.conversation))
	}
	ctx, span := m.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	call := &modelCall{m: m, span: span, start: time.Now(), reqModel: req.Model, stream: stream,
		content: m.c.content && span.IsRecording()}
	if call.content {
		span.SetAttributes(inputContent(req)...)
	}
	return ctx, call
}

// end ends the span of a call that returned (complete: with its whole
// answer) or failed with err.
func (c *modelCall) end(ctx context.Context, resp llm.Response, complete bool, err error) {
	c.span.SetAttributes(c.responseAttrs(resp, complete)...)
	if err != nil {
		fail(c.span, err)
	} else if c.content && complete {
		c.span.SetAttributes(outputContent(resp))
	}
	c.span.End()
	c.record(ctx, resp, err)
}

// abandon ends the span of a stream whose consumer stopped ranging it.
func (c *modelCall) abandon(ctx context.Context, resp llm.Response) {
	c.span.SetAttributes(c.responseAttrs(resp, false)...)
	c.span.SetAttributes(AbandonedKey.Bool(true))
	c.span.End()
	c.record(ctx, resp, nil)
}

func (c *modelCall) endPanicked(ctx context.Context, v any) {
	panicked(c.span, v)
	c.span.End()
	c.recordDuration(ctx, "", ErrorTypePanic)
}

func (c *modelCall) responseAttrs(resp llm.Response, complete bool) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if resp.ID != "" {
		attrs = append(attrs, semconv.GenAIResponseID(resp.ID))
	}
	if resp.Model != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(resp.Model))
	}
	if complete && resp.FinishReason != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(string(resp.FinishReason)))
	}
	attrs = append(attrs, usageAttrs(resp.Usage, c.m.c.provider)...)
	if c.stream && !c.first.IsZero() {
		attrs = append(attrs, semconv.GenAIResponseTimeToFirstChunk(c.first.Sub(c.start).Seconds()))
	}
	return attrs
}

// record records the call's metrics: its duration always, its input and
// output tokens when the provider reported them.
func (c *modelCall) record(ctx context.Context, resp llm.Response, err error) {
	et := ""
	if err != nil {
		et = errorType(err)
	}
	c.recordDuration(ctx, resp.Model, et)
	attrs := c.metricAttrs(resp.Model)
	n := len(attrs)
	if in := inputTokens(resp.Usage, c.m.c.provider); in != 0 {
		c.m.ins.tokens.Record(ctx, in, metric.WithAttributes(append(attrs[:n:n], semconv.GenAITokenTypeInput)...))
	}
	if out := resp.Usage.OutputTokens; out != 0 {
		c.m.ins.tokens.Record(ctx, out, metric.WithAttributes(append(attrs[:n:n], semconv.GenAITokenTypeOutput)...))
	}
}

func (c *modelCall) recordDuration(ctx context.Context, respModel, errType string) {
	attrs := c.metricAttrs(respModel)
	if errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
	}
	c.m.ins.duration.Record(ctx, time.Since(c.start).Seconds(), metric.WithAttributes(attrs...))
}

func (c *modelCall) metricAttrs(respModel string) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, semconv.GenAIOperationNameChat)
	if c.m.c.provider != "" {
		attrs = append(attrs, semconv.GenAIProviderNameKey.String(c.m.c.provider))
	}
	if c.reqModel != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(c.reqModel))
	}
	if respModel != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(respModel))
	}
	return attrs
}

// fold keeps what the span needs from a stream's events; with content
// capture it folds the whole answer too.
type fold struct {
	resp     llm.Response
	finished bool
	acc      *llm.Accumulator
}

func (f *fold) add(e llm.Event) {
	switch e := e.(type) {
	case llm.ResponseStart:
		if e.ID != "" {
			f.resp.ID = e.ID
		}
		if e.Model != "" {
			f.resp.Model = e.Model
		}
	case llm.UsageReport:
		f.resp.Usage = e.Apply(f.resp.Usage)
	case llm.Finish:
		f.finished = true
		f.resp.FinishReason = e.Reason
	}
	if f.acc != nil {
		f.acc.Add(e)
	}
}

func (f *fold) response() llm.Response {
	if f.acc == nil {
		return f.resp
	}
	resp := f.acc.Response()
	resp.FinishReason = f.resp.FinishReason
	return resp
}
