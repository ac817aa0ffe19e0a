package loomotel

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// harness records spans with the real SDK and counts every End call, so
// that a span ended twice shows (the SDK ignores a second End).
type harness struct {
	t    *testing.T
	sr   *tracetest.SpanRecorder
	ends *atomic.Int64
	opt  Option
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	h := &harness{t: t, sr: sr, ends: new(atomic.Int64)}
	h.opt = WithTracerProvider(countingProvider{TracerProvider: tp, ends: h.ends})
	return h
}

// ended returns the ended spans, after checking that every started span
// ended exactly once.
func (h *harness) ended() []sdktrace.ReadOnlySpan {
	h.t.Helper()
	started, ended := len(h.sr.Started()), h.sr.Ended()
	if started != len(ended) {
		h.t.Fatalf("%d spans started, %d ended", started, len(ended))
	}
	if n := h.ends.Load(); n != int64(len(ended)) {
		h.t.Fatalf("End called %d times for %d spans", n, len(ended))
	}
	return ended
}

// only returns the one ended span, checking there is exactly one.
func (h *harness) only() sdktrace.ReadOnlySpan {
	h.t.Helper()
	spans := h.ended()
	if len(spans) != 1 {
		h.t.Fatalf("got %d spans %v, want 1", len(spans), names(spans))
	}
	return spans[0]
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var ns []string
	for _, s := range spans {
		ns = append(ns, s.Name())
	}
	return ns
}

type countingProvider struct {
	trace.TracerProvider
	ends *atomic.Int64
}

func (p countingProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return countingTracer{Tracer: p.TracerProvider.Tracer(name, opts...), ends: p.ends}
}

type countingTracer struct {
	trace.Tracer
	ends *atomic.Int64
}

func (t countingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, s := t.Tracer.Start(ctx, name, opts...)
	cs := countingSpan{Span: s, ends: t.ends}
	return trace.ContextWithSpan(ctx, cs), cs
}

type countingSpan struct {
	trace.Span
	ends *atomic.Int64
}

func (s countingSpan) End(opts ...trace.SpanEndOption) {
	s.ends.Add(1)
	s.Span.End(opts...)
}

// nonNegFloat in a want map matches any float64 >= 0.
type nonNegFloat struct{}

// checkAttrs checks that span has exactly the attributes of want (values
// as attribute.Value.AsInterface returns them).
func checkAttrs(t *testing.T, span sdktrace.ReadOnlySpan, want map[string]any) {
	t.Helper()
	got := attrMap(span.Attributes())
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: attribute %s missing (want %#v)", span.Name(), k, w)
			continue
		}
		if _, ok := w.(nonNegFloat); ok {
			if f, ok := g.(float64); !ok || f < 0 {
				t.Errorf("%s: %s = %#v, want a float64 >= 0", span.Name(), k, g)
			}
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %s = %#v, want %#v", span.Name(), k, g, w)
		}
	}
	var extra []string
	for k, g := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, fmt.Sprintf("%s=%#v", k, g))
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("%s: unexpected attributes %s", span.Name(), strings.Join(extra, ", "))
	}
}

func attrMap(kvs []attribute.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

func checkStatus(t *testing.T, span sdktrace.ReadOnlySpan, code codes.Code, desc string) {
	t.Helper()
	if s := span.Status(); s.Code != code || s.Description != desc {
		t.Errorf("%s: status %v %q, want %v %q", span.Name(), s.Code, s.Description, code, desc)
	}
}

// eventNames returns the names of span's events.
func eventNames(span sdktrace.ReadOnlySpan) []string {
	var ns []string
	for _, e := range span.Events() {
		ns = append(ns, e.Name)
	}
	return ns
}

// exceptionMessage returns the exception.message of span's only exception
// event.
func exceptionMessage(t *testing.T, span sdktrace.ReadOnlySpan) string {
	t.Helper()
	if got := eventNames(span); !slices.Equal(got, []string{"exception"}) {
		t.Fatalf("%s: events %v, want one exception", span.Name(), got)
	}
	msg, _ := attrMap(span.Events()[0].Attributes)["exception.message"].(string)
	return msg
}

// byName returns the ended spans called name.
func byName(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}
