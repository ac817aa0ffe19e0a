package loomotel

import (
	"context"
	"maps"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
)

func collect(t *testing.T, r sdkmetric.Reader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// key identifies a data point by its attributes.
func key(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }

func set(kvs ...attribute.KeyValue) string { return key(attribute.NewSet(kvs...)) }

func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	h := newHarness(t)
	script := modeltest.NewScript(modeltest.Turn{Response: answer()}, modeltest.Fail(model.KindRateLimited), modeltest.Turn{Events: streamEvents()})
	m := Model(h.opt, WithMeterProvider(mp), WithProvider("openai"))(script)

	req := llm.Request{Model: "gpt-test"}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), req); err == nil {
		t.Fatal("the second call did not fail")
	}
	for range m.Stream(context.Background(), req) {
	}
	got := collect(t, reader)
	if len(got) != 2 {
		t.Fatalf("metrics %v, want two", slices.Collect(maps.Keys(got)))
	}

	op := attribute.String("gen_ai.operation.name", "chat")
	prov := attribute.String("gen_ai.provider.name", "openai")
	reqm := attribute.String("gen_ai.request.model", "gpt-test")
	resp := attribute.String("gen_ai.response.model", "gpt-test-0613")

	dur := got["gen_ai.client.operation.duration"]
	dh, ok := dur.Data.(metricdata.Histogram[float64])
	if !ok || dur.Unit != "s" {
		t.Fatalf("duration: %T unit %q, want a float histogram in s", dur.Data, dur.Unit)
	}
	wantDur := map[string]uint64{
		set(op, prov, reqm, resp): 2, // the blocking and the streamed call
		set(op, prov, reqm, attribute.String("error.type", "rate_limited")): 1,
	}
	if len(dh.DataPoints) != len(wantDur) {
		t.Fatalf("duration: %d points, want %d", len(dh.DataPoints), len(wantDur))
	}
	for _, p := range dh.DataPoints {
		if n, ok := wantDur[key(p.Attributes)]; !ok || p.Count != n {
			t.Errorf("duration point %s count %d, want %d", key(p.Attributes), p.Count, n)
		}
		if !slices.Equal(p.Bounds, durationBuckets) {
			t.Errorf("duration bounds %v", p.Bounds)
		}
	}

	tok := got["gen_ai.client.token.usage"]
	th, ok := tok.Data.(metricdata.Histogram[int64])
	if !ok || tok.Unit != "{token}" {
		t.Fatalf("tokens: %T unit %q, want an int histogram in {token}", tok.Data, tok.Unit)
	}
	wantTok := map[string]int64{
		set(op, prov, reqm, resp, attribute.String("gen_ai.token.type", "input")):  120 + 40,
		set(op, prov, reqm, resp, attribute.String("gen_ai.token.type", "output")): 30 + 5,
	}
	if len(th.DataPoints) != len(wantTok) {
		t.Fatalf("tokens: %d points, want %d", len(th.DataPoints), len(wantTok))
	}
	for _, p := range th.DataPoints {
		if sum, ok := wantTok[key(p.Attributes)]; !ok || p.Sum != sum || p.Count != 2 {
			t.Errorf("tokens point %s sum %d count %d, want %d over 2", key(p.Attributes), p.Sum, p.Count, sum)
		}
		if !slices.Equal(p.Bounds, tokenBuckets) {
			t.Errorf("token bounds %v", p.Bounds)
		}
	}
}
