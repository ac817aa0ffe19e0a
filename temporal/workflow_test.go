package temporal

import (
	"errors"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
)

func TestTextTurn(t *testing.T) {
	script := modeltest.NewScript(modeltest.Text("hello there").WithUsage(llm.Usage{InputTokens: 10, OutputTokens: 3}))
	reg := Registry{Models: map[string]model.Model{"m": script}}
	in := Input{Model: "m", Run: run.Config{System: "be brief", Prompt: llm.UserText("hi")}}
	resp, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, in)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Output != "hello there" || resp.Usage.InputTokens != 10 || len(resp.Calls) != 1 {
		t.Fatalf("response %+v", resp)
	}
	req := script.Requests()[0]
	if req.System != "be brief" || len(req.Messages) != 1 || req.Messages[0].Text() != "hi" {
		t.Fatalf("the model got %+v", req)
	}
	want, err := inProcess(t, modeltest.NewScript(modeltest.Text("hello there").WithUsage(llm.Usage{InputTokens: 10, OutputTokens: 3})), mustSet(t), nil, in.Run, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameResponse(t, want, resp)
}

func toolScript() []modeltest.Turn {
	return []modeltest.Turn{
		modeltest.ToolCalls(modeltest.Call("c1", "echo", `{"text":"one"}`)),
		modeltest.ToolCalls(modeltest.Call("c2", "echo", `{"text":"two"}`), modeltest.Call("c3", "shout", `{"text":"three"}`)),
		modeltest.Text("all done"),
	}
}

func TestToolRoundTrip(t *testing.T) {
	tools := mustSet(t, echoTool("echo", llm.EffectReadOnly), echoTool("shout", llm.EffectDestructive))
	script := modeltest.NewScript(toolScript()...)
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: tools}
	in := Input{Model: "m", Tools: []string{"echo", "shout"}, Run: run.Config{Prompt: llm.UserText("go"), MaxTurns: run.Turns(5)}}
	resp, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, in)
	if err != nil {
		t.Fatal(err)
	}
	ref := modeltest.NewScript(toolScript()...)
	want, err := inProcess(t, ref, tools, in.Tools, in.Run, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameResponse(t, want, resp)
	// The model saw, call by call, exactly the requests the in-process
	// run made: the transcript assembled from blobs is the run's history.
	got, exp := script.Requests(), ref.Requests()
	if len(got) != len(exp) {
		t.Fatalf("%d model calls, want %d", len(got), len(exp))
	}
	for i := range exp {
		sameMessages(t, "messages of call "+string(rune('1'+i)), exp[i].Messages, got[i].Messages)
		deepEqual(t, "tools of a call", got[i].Tools, exp[i].Tools)
	}
	last := resp.Messages[len(resp.Messages)-2].ToolResults()
	if len(last) != 2 || last[0].Content != "echo: two" || last[1].Content != "shout: three" {
		t.Fatalf("results of turn 2: %+v", last)
	}
}

func TestNonRetryableModelError(t *testing.T) {
	for _, kind := range []model.Kind{model.KindAuth, model.KindBadRequest, model.KindQuota} {
		t.Run(string(kind), func(t *testing.T) {
			script := modeltest.NewScript(modeltest.Fail(kind), modeltest.Text("never"))
			reg := Registry{Models: map[string]model.Model{"m": script}}
			_, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, Input{Model: "m", Run: run.Config{Prompt: llm.UserText("hi")}})
			var me *model.Error
			if !errors.As(err, &me) || me.Kind != kind {
				t.Fatalf("error %v (%T), want a *model.Error of kind %s", err, err, kind)
			}
			if script.Calls() != 1 {
				t.Fatalf("the model was called %d times; a %s failure must not be retried", script.Calls(), kind)
			}
		})
	}
}

func TestRetryableModelErrorRetriedByTemporal(t *testing.T) {
	script := modeltest.NewScript(modeltest.Fail(model.KindOverloaded), modeltest.Fail(model.KindServer), modeltest.Text("third time"))
	reg := Registry{Models: map[string]model.Model{"m": script}}
	resp, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, Input{Model: "m", Run: run.Config{Prompt: llm.UserText("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Output != "third time" || script.Calls() != 3 || len(resp.Calls) != 1 {
		t.Fatalf("output %q after %d model calls and %d records", resp.Output, script.Calls(), len(resp.Calls))
	}
}

// A model registered wrapped in model.Retry does not retry inside the
// activity: each Temporal attempt is one call.
func TestRetryMiddlewareOffInActivities(t *testing.T) {
	script := modeltest.NewScript(modeltest.Fail(model.KindOverloaded), modeltest.Fail(model.KindServer), modeltest.Text("third time"))
	var retried int
	wrapped := model.Retry(model.RetryPolicy{OnRetry: func(model.RetryInfo) { retried++ }})(script)
	reg := Registry{Models: map[string]model.Model{"m": wrapped}}
	resp, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, Input{Model: "m", Run: run.Config{Prompt: llm.UserText("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Output != "third time" || script.Calls() != 3 || retried != 0 {
		t.Fatalf("output %q after %d model calls, %d retries inside the activity", resp.Output, script.Calls(), retried)
	}
}

func TestRetryableModelErrorGivesUp(t *testing.T) {
	var turns []modeltest.Turn
	for range 3 {
		turns = append(turns, modeltest.Fail(model.KindRateLimited))
	}
	script := modeltest.NewScript(turns...)
	reg := Registry{Models: map[string]model.Model{"m": script}}
	in := Input{Model: "m", Run: run.Config{Prompt: llm.UserText("hi")}}
	in.Options.ModelRetry = &retryPolicy{MaximumAttempts: 3}
	_, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, in)
	var me *model.Error
	if !errors.As(err, &me) || me.Kind != model.KindRateLimited || !me.Retryable() {
		t.Fatalf("error %v, want the last rate-limit failure", err)
	}
	if script.Calls() != 3 {
		t.Fatalf("%d calls, want 3 attempts", script.Calls())
	}
}
