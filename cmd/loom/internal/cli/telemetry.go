package cli

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/loomkit/loom/internal/redact"
	"github.com/loomkit/loom/loomotel"
)

// tracing is loom's OpenTelemetry export, on when the standard OTLP
// environment names an endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and OTEL_SDK_DISABLED is not true.
// Spans go over OTLP/HTTP with protobuf, configured by the standard
// variables (headers, timeout, compression, certificates); service.name is
// "loom" unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say
// otherwise. Prompts, answers and tool input and output are recorded only
// with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
type tracing struct {
	tp   *sdktrace.TracerProvider
	opts []loomotel.Option
}

// startTracing returns loom's tracing, or nil when the environment asks
// for none.
func startTracing(ctx context.Context, getenv func(string) string, provider string, red *redact.Redactor) (*tracing, error) {
	if getenv("OTEL_SDK_DISABLED") == "true" ||
		(getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "") {
		return nil, nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(v); p != "" && p != "http/protobuf" {
			return nil, usagef("Unset it, or set it to http/protobuf.", "%s=%s: loom exports traces over OTLP/HTTP with protobuf only", v, p)
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, usagef("Check the OTEL_EXPORTER_OTLP_* variables.", "cannot set up the trace export: %v", err)
	}
	res, err := resource.Merge(resource.Default(),
		resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("loom"), semconv.ServiceVersion(Version())))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	// Variables the user set win over loom's defaults.
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	// Spans are scrubbed as they leave: an exception message may quote a
	// provider's error body, which may echo the key.
	t := &tracing{tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(scrubExporter{SpanExporter: exp, red: red}), sdktrace.WithResource(res))}
	t.opts = []loomotel.Option{
		loomotel.WithTracerProvider(t.tp),
		loomotel.WithProvider(provider),
		loomotel.WithAgentName("loom"),
		loomotel.WithContentCapture(getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") == "true"),
	}
	return t, nil
}

// temporalInterceptor returns the Temporal SDK's tracing interceptor,
// exporting with t's provider and carrying the W3C trace context in
// Temporal headers. Queries are not traced: loom run --temporal polls
// the run's progress with them.
func (t *tracing) temporalInterceptor() (interceptor.Interceptor, error) {
	return temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:              t.tp.Tracer("temporal-sdk-go"),
		DisableQueryTracing: true,
	})
}

// shutdown sends the spans not sent yet, waiting at most 5 s.
func (t *tracing) shutdown() {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t.tp.Shutdown(ctx)
}
