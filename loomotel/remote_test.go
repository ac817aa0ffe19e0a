package loomotel

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

// A remote run's span is a CLIENT span whose context is in the context
// returned, so that what starts the run there (and propagates it) makes
// its children; End records the usage, or the failure.
func TestRemoteRun(t *testing.T) {
	h := newHarness(t)
	ctx, r := StartRemoteRun(context.Background(), "run_9", h.opt, WithAgentName("loom"), WithProvider("anthropic"), WithConversationID("conv_9"))
	_, child := newConfig([]Option{h.opt}).tracer().Start(ctx, "StartWorkflow:loom")
	child.End()
	r.End(llm.Usage{InputTokens: 10, CacheReadTokens: 5, OutputTokens: 2}, nil)
	r.End(llm.Usage{}, errors.New("late")) // a second End changes nothing
	spans := h.ended()
	if len(spans) != 2 {
		t.Fatalf("spans %v, want 2", names(spans))
	}
	run := byName(spans, "invoke_agent loom")[0]
	if run.SpanKind() != trace.SpanKindClient {
		t.Errorf("kind %v, want client", run.SpanKind())
	}
	if c := byName(spans, "StartWorkflow:loom")[0]; c.Parent().SpanID() != run.SpanContext().SpanID() {
		t.Error("a span started with the returned context is not the run's child")
	}
	checkStatus(t, run, codes.Unset, "")
	checkAttrs(t, run, map[string]any{
		"gen_ai.operation.name":                "invoke_agent",
		"gen_ai.agent.name":                    "loom",
		"gen_ai.provider.name":                 "anthropic",
		"gen_ai.conversation.id":               "conv_9",
		"loom.run.id":                          "run_9",
		"gen_ai.usage.input_tokens":            int64(10),
		"gen_ai.usage.output_tokens":           int64(2),
		"gen_ai.usage.cache_read.input_tokens": int64(5),
	})
}

func TestRemoteRunFails(t *testing.T) {
	h := newHarness(t)
	_, r := StartRemoteRun(context.Background(), "", h.opt)
	err := &model.Error{Kind: model.KindRateLimited, Message: "slow down"}
	r.End(llm.Usage{}, err)
	run := h.only()
	if run.Name() != "invoke_agent" {
		t.Errorf("name %q, want invoke_agent", run.Name())
	}
	checkStatus(t, run, codes.Error, err.Error())
	checkAttrs(t, run, map[string]any{
		"gen_ai.operation.name": "invoke_agent",
		"error.type":            "rate_limited",
	})
}
