package loomotel

import (
	"context"
	"encoding/json"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

// toolType is gen_ai.tool.type of every loom tool: the model asks, the
// application runs the function.
const toolType = "function"

// Tool returns middleware that traces every call of a tool with a span of
// kind INTERNAL named "execute_tool {tool name}", carrying
// gen_ai.tool.name, gen_ai.tool.description, gen_ai.tool.type "function"
// and loom.tool.effect. In a call made by an agent it also carries
// loom.tool.idempotency_key and gen_ai.tool.call.id, both read from
// agent.IdempotencyKey (loom passes a tool no other trace of its call id).
// The key is "<run id>/<turn>/<call id>": under Run or Stream the run id
// is known and the call id is exact; elsewhere the call id is taken as the
// key's last "/"-separated part, which is right for the ids providers and
// loom make (they hold no "/"), and left out when the key does not have
// that shape.
//
// A result with IsError set makes the span's status Error with error.type
// "tool_error" (the status description is the result's content only with
// WithContentCapture). A Go error from the tool is recorded, with
// error.type as for model calls (see Model). A panic is recorded with
// error.type "panic" and goes on unwinding: the agent turns it into an
// error result. The middleware keeps the tool's tool.Approvable decisions
// (it wraps with tool.Wrap). It is safe for concurrent use.
func Tool(opts ...Option) tool.Middleware {
	c := newConfig(opts)
	tr := c.tracer()
	return func(t tool.Tool) tool.Tool {
		return tool.Wrap(t, func(ctx context.Context, args json.RawMessage) (res llm.ToolResult, err error) {
			ctx, span := startTool(ctx, tr, t.Spec())
			content := c.content && span.IsRecording()
			if content {
				span.SetAttributes(semconv.GenAIToolCallArgumentsKey.String(string(args)))
			}
			defer func() {
				if v := recover(); v != nil {
					panicked(span, v)
					span.End()
					panic(v)
				}
			}()
			res, err = t.Call(ctx, args)
			switch {
			case err != nil:
				fail(span, err)
			case res.IsError:
				span.SetAttributes(semconv.ErrorTypeKey.String(ErrorTypeToolError))
				desc := "the tool returned an error result"
				if content {
					desc = res.Content
				}
				span.SetStatus(codes.Error, desc)
			case content:
				span.SetAttributes(semconv.GenAIToolCallResultKey.String(res.Content))
			}
			span.End()
			return res, err
		})
	}
}

func startTool(ctx context.Context, tr trace.Tracer, spec llm.ToolSpec) (context.Context, trace.Span) {
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs,
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(spec.Name),
		semconv.GenAIToolType(toolType),
		EffectKey.String(spec.Effect.String()),
	)
	if spec.Description != "" {
		attrs = append(attrs, semconv.GenAIToolDescription(spec.Description))
	}
	if key := agent.IdempotencyKey(ctx); key != "" {
		attrs = append(attrs, IdempotencyKeyKey.String(key))
		if id := callID(ctx, key); id != "" {
			attrs = append(attrs, semconv.GenAIToolCallID(id))
		}
	}
	name := semconv.GenAIOperationNameExecuteTool.Value.AsString() + " " + spec.Name
	return tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// callID returns the call id in key, an idempotency key
// "<run id>/<turn>/<call id>", or "" when it cannot tell.
func callID(ctx context.Context, key string) string {
	if r := runFrom(ctx); r != nil {
		if id := r.runID(); id != "" {
			if rest, ok := strings.CutPrefix(key, id+"/"); ok {
				if turn, call, ok := strings.Cut(rest, "/"); ok && isTurn(turn) {
					return call
				}
			}
		}
	}
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return ""
	}
	j := strings.LastIndexByte(key[:i], '/')
	if j < 0 || !isTurn(key[j+1:i]) {
		return ""
	}
	return key[i+1:]
}

func isTurn(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
