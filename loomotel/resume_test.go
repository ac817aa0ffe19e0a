package loomotel

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/tool"
)

// suspendedRun starts a run whose only tool call waits for approval, so
// that it is suspended in st, and returns an agent that resumes it
// (answering the model's second turn).
func suspendedRun(t *testing.T, h *harness, st store.Store) *agent.Agent {
	t.Helper()
	var calls int
	guarded := tool.Func("guarded", "", func(context.Context, addArgs) (int, error) { calls++; return 3, nil },
		&tool.FuncOptions[addArgs]{NeedsApproval: true})
	m := modeltest.NewScript(
		modeltest.ToolCalls(modeltest.Call("c1", "guarded", `{"a":1,"b":2}`)).WithUsage(llm.Usage{InputTokens: 10, OutputTokens: 5}),
		modeltest.Text("it is 3").WithUsage(llm.Usage{InputTokens: 20, OutputTokens: 3}),
	)
	suspend := agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) ([]run.Decision, error) {
		return nil, agent.ErrSuspend
	})
	a := newAgent(t, h, m, agent.Config{Approver: suspend, Store: st}, guarded)
	in := agent.Input{Prompt: llm.UserText("add"), RunID: "r1", ConversationID: "conv-7"}
	if _, err := Run(context.Background(), a, in, h.opt); !errors.Is(err, agent.ErrSuspend) {
		t.Fatalf("Run = %v, want a suspension", err)
	}
	return a
}

// A resumed run gets its own invoke_agent span, marked resumed, above the
// model and tool spans it makes, with the conversation given as an
// option; Resume and ResumeStream alike.
func TestResumeSpanTree(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		name := "Resume"
		if streaming {
			name = "ResumeStream"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			st := store.NewMemory()
			a := suspendedRun(t, h, st)
			first := len(h.ended())
			var events []string
			res := agent.Resumption{RunID: "r1", Decisions: []run.Decision{{CallID: "c1", Action: run.Approved}}}
			opts := []Option{h.opt, WithAgentName("coder"), WithProvider("openai"), WithConversationID("conv-7")}
			var out agent.Result
			var err error
			if streaming {
				for e, serr := range ResumeStream(context.Background(), a, res, opts...) {
					if serr != nil {
						err = serr
						break
					}
					events = append(events, agent.EventType(e))
					if d, ok := e.(agent.Done); ok {
						out = d.Result
					}
				}
			} else {
				res.OnEvent = func(e agent.Event) { events = append(events, agent.EventType(e)) }
				out, err = Resume(context.Background(), a, res, opts...)
			}
			if err != nil || out.Output != "it is 3" {
				t.Fatalf("resume = %q, %v", out.Output, err)
			}
			if len(events) == 0 || events[0] != "run_started" || events[len(events)-1] != "done" {
				t.Errorf("events %v: the caller does not see the run's events", events)
			}
			spans := h.ended()[first:]
			root := byName(spans, "invoke_agent coder")
			chats := byName(spans, "chat gpt-test")
			tools := byName(spans, "execute_tool guarded")
			if len(root) != 1 || len(chats) != 1 || len(tools) != 1 || len(spans) != 3 {
				t.Fatalf("spans of the resumed run %v, want invoke_agent coder, chat gpt-test, execute_tool guarded", names(spans))
			}
			ag := root[0]
			if ag.Parent().IsValid() {
				t.Errorf("the resumed run's span has parent %v", ag.Parent())
			}
			for _, s := range append(chats, tools...) {
				if s.Parent().SpanID() != ag.SpanContext().SpanID() || s.SpanContext().TraceID() != ag.SpanContext().TraceID() {
					t.Errorf("%s is not a child of the resumed run's span", s.Name())
				}
			}
			checkStatus(t, ag, codes.Unset, "")
			checkAttrs(t, ag, map[string]any{
				"gen_ai.operation.name":      "invoke_agent",
				"gen_ai.agent.name":          "coder",
				"gen_ai.provider.name":       "openai",
				"gen_ai.conversation.id":     "conv-7",
				"loom.run.id":                "r1",
				"loom.run.resumed":           true,
				"loom.run.turns":             int64(2),
				"gen_ai.usage.input_tokens":  int64(30), // the run's totals, the first turn's included
				"gen_ai.usage.output_tokens": int64(8),
			})
			if got := attrMap(chats[0].Attributes())["gen_ai.conversation.id"]; got != "conv-7" {
				t.Errorf("chat span: gen_ai.conversation.id %v, want conv-7", got)
			}
		})
	}
}

// A run started by Run is not marked resumed, and the conversation id of
// the Input wins over WithConversationID.
func TestRunNotResumed(t *testing.T) {
	h := newHarness(t)
	a := newAgent(t, h, modeltest.NewScript(modeltest.Text("hello")), agent.Config{Store: store.NewMemory()})
	in := agent.Input{Prompt: llm.UserText("hi"), ConversationID: "conv-in"}
	if _, err := Run(context.Background(), a, in, h.opt, WithConversationID("conv-opt")); err != nil {
		t.Fatal(err)
	}
	ag := byName(h.ended(), "invoke_agent")[0]
	got := attrMap(ag.Attributes())
	if _, ok := got["loom.run.resumed"]; ok {
		t.Errorf("a new run has loom.run.resumed %v", got["loom.run.resumed"])
	}
	if got["gen_ai.conversation.id"] != "conv-in" {
		t.Errorf("gen_ai.conversation.id %v, want conv-in", got["gen_ai.conversation.id"])
	}
}

// A resumption the agent refuses fails the resumed run's span with the
// agent's error.
func TestResumeRefused(t *testing.T) {
	h := newHarness(t)
	a := newAgent(t, h, modeltest.NewScript(), agent.Config{Store: store.NewMemory()})
	_, err := Resume(context.Background(), a, agent.Resumption{RunID: "nope"}, h.opt)
	if err == nil {
		t.Fatal("resuming an unknown run succeeded")
	}
	ag := h.only()
	checkStatus(t, ag, codes.Error, err.Error())
	checkAttrs(t, ag, map[string]any{
		"gen_ai.operation.name": "invoke_agent",
		"loom.run.id":           "nope",
		"loom.run.resumed":      true,
		"error.type":            "*agent.ResumeError",
	})
	if !errors.Is(err, agent.ErrResume) {
		t.Errorf("err = %v, want agent.ErrResume", err)
	}
}
