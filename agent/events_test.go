package agent_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
)

// Every call is reported like any other: a ToolCall event, then a
// ToolResult with the result the history holds, also when it names a
// tool that does not exist and its turn is answered without running
// anything (the default policy's Retry, and a custom Skip).
func TestUnknownToolCallsAreReported(t *testing.T) {
	for _, how := range []string{"run", "stream"} {
		for _, policy := range []struct {
			name string
			p    agent.InvalidToolPolicy
		}{
			{"default", nil},
			{"skip", agent.InvalidToolPolicyFunc(func(_ context.Context, c agent.InvalidCall) run.Resolution {
				return run.Skip{Reason: "skipped " + c.Call.Name}
			})},
		} {
			t.Run(how+"/"+policy.name, func(t *testing.T) {
				p := &probe{name: "read_file", effect: llm.EffectReadOnly}
				m := modeltest.NewScript(
					modeltest.ToolCalls(call("1", "rm_everything", "/"), call("2", "read_file", "b")),
					modeltest.Text("done"),
				)
				a := agent.New(agent.Config{Model: m, Tools: set(t, p), InvalidToolPolicy: policy.p})
				collect := runCollect
				if how == "stream" {
					collect = streamCollect
				}
				res, evs, err := collect(t, a, agent.Prompt("go"))
				if err != nil {
					t.Fatal(err)
				}
				if got := p.order(); len(got) != 0 {
					t.Fatalf("ran %v; nothing of the turn runs", got)
				}
				var got []string
				for _, e := range evs {
					switch e := e.(type) {
					case agent.InvalidToolCall:
						got = append(got, "invalid "+e.Call.Name)
					case agent.ToolCall:
						got = append(got, fmt.Sprintf("call %s %s preresolved=%v", e.Call.ID, e.Call.Name, e.Preresolved))
					case agent.ToolResult:
						got = append(got, fmt.Sprintf("result %s %s error=%v", e.Call.ID, e.Call.Name, e.Result.IsError))
					}
				}
				want := []string{
					"invalid rm_everything",
					"call 1 rm_everything preresolved=true", "call 2 read_file preresolved=true",
					"result 1 rm_everything error=true", "result 2 read_file error=true",
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				// The results reported are those the model was sent.
				sent := allResults(res.Messages)
				results := eventsOf[agent.ToolResult](evs)
				for i, r := range results {
					if !reflect.DeepEqual(r.Result, sent[i]) {
						t.Errorf("result %d reported %+v, sent %+v", i, r.Result, sent[i])
					}
				}
				if !strings.Contains(results[0].Result.Content, "rm_everything") {
					t.Errorf("the result of the unknown call does not name it: %q", results[0].Result.Content)
				}
			})
		}
	}
}
