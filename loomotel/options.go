package loomotel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and meter loomotel
// uses.
const ScopeName = "github.com/loomkit/loom/loomotel"

// Option configures Model, Tool, Instrument, Run, Stream, Resume and
// ResumeStream. Options given
// later win; an option that does not apply to a function is ignored by it.
type Option func(*config)

type config struct {
	tp           trace.TracerProvider
	mp           metric.MeterProvider
	provider     string
	agentName    string
	conversation string
	content      bool
}

func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	return c
}

func (c *config) tracer() trace.Tracer {
	return c.tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))
}

// WithTracerProvider makes spans with tp instead of the global provider
// (otel.GetTracerProvider). A nil tp keeps the global one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider records the model-call metrics with mp instead of the
// global provider (otel.GetMeterProvider). A nil mp keeps the global one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithProvider names the provider behind the model, as the semantic
// conventions spell it: "openai", "anthropic", "deepseek", "gcp.gemini",
// ... It becomes gen_ai.provider.name on model and agent spans and on the
// metrics. llm.Request does not say which provider serves it, so without
// this option gen_ai.provider.name is left out.
//
// gen_ai.usage.input_tokens counts cached input too, as the conventions
// ask, whatever the provider: llm.Usage.InputTokens does so for every
// adapter (model/anthropic adds the cache reads and writes that
// Anthropic's input_tokens leaves out).
func WithProvider(name string) Option {
	return func(c *config) { c.provider = name }
}

// WithAgentName names the agent on the spans of Run and Stream:
// gen_ai.agent.name, and the span name "invoke_agent {name}" (plain
// "invoke_agent" without one).
func WithAgentName(name string) Option {
	return func(c *config) { c.agentName = name }
}

// WithConversationID sets gen_ai.conversation.id on the spans of Run,
// Stream, Resume and ResumeStream and on the model spans of their runs
// when the run does not name its conversation itself: always for Resume
// and ResumeStream (agent.Resumption has no conversation), and for Run
// and Stream when Input.ConversationID is empty.
func WithConversationID(id string) Option {
	return func(c *config) { c.conversation = id }
}

// WithContentCapture records what the model and the tools read and write:
// the system prompt, the messages sent and the answer on model spans
// (gen_ai.system_instructions, gen_ai.input.messages,
// gen_ai.output.messages, as JSON strings), the prompt and the final answer
// on agent spans, and the arguments and the text of successful results of
// tool calls (gen_ai.tool.call.arguments, gen_ai.tool.call.result; a
// result's images appear only in the next model span's input messages).
// It is off by
// default: content is likely to hold personal or secret data, and it is
// large. Turn it on only where the telemetry store may keep such data.
func WithContentCapture(on bool) Option {
	return func(c *config) { c.content = on }
}
