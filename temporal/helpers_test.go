package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"google.golang.org/protobuf/proto"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/tool"
)

type textIn struct {
	Text string `json:"text"`
}

// echoTool returns a tool that answers its text, with the given effect.
func echoTool(name string, effect llm.Effect) tool.Tool {
	return tool.Func(name, "Answers its text.", func(_ context.Context, in textIn) (string, error) {
		return name + ": " + in.Text, nil
	}, &tool.FuncOptions[textIn]{Effect: effect})
}

func mustSet(t testing.TB, tools ...tool.Tool) *tool.Set {
	t.Helper()
	s, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newEnv returns a test environment with the workflow and activities of
// reg registered.
func newEnv(t testing.TB, reg Registry) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := newBareEnv(t)
	if err := Register(env, reg); err != nil {
		t.Fatal(err)
	}
	return env
}

// execute runs in to its end in test environments made by mk, following
// continue-as-new, and returns the response, the error and the number of
// workflow runs used.
func execute(t testing.TB, mk func() *testsuite.TestWorkflowEnvironment, in Input) (run.Response, error, int) {
	t.Helper()
	for runs := 1; ; runs++ {
		env := mk()
		env.ExecuteWorkflow(WorkflowName, in)
		if !env.IsWorkflowCompleted() {
			t.Fatal("workflow did not complete")
		}
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			if runs > 1000 {
				t.Fatal("continues as new for ever")
			}
			in = Input{}
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			return run.Response{}, decodeError(err), runs
		}
		var res Result
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		for len(res.Response.Messages) < res.Omitted {
			v, err := env.QueryWorkflow(QueryMessages, len(res.Response.Messages))
			if err != nil {
				t.Fatal(err)
			}
			var page MessagePage
			if err := v.Get(&page); err != nil || len(page.Messages) == 0 {
				t.Fatalf("messages page: %+v, %v", page, err)
			}
			res.Response.Messages = append(res.Response.Messages, page.Messages...)
		}
		return res.Response, nil, runs
	}
}

// inProcess drives a run with cfg to its end in this process, the way the
// workflow does (invalid calls resolved by ResolveInvalid, tools called one
// by one), with decide answering approvals. It is the reference the
// workflow's results are compared with.
func inProcess(t testing.TB, m model.Model, tools *tool.Set, names []string, cfg run.Config, decide func(run.ApproveTools) []run.Decision) (run.Response, error) {
	t.Helper()
	ctx := context.Background()
	for _, n := range names {
		tl, ok := tools.Lookup(n)
		if !ok {
			t.Fatalf("no tool %q", n)
		}
		spec := tl.Spec()
		if _, ok := tl.(tool.Approvable); ok {
			spec.NeedsApproval = true // as the agent does: asked per call below
		}
		cfg.Tools = append(cfg.Tools, spec)
	}
	r := run.New(cfg)
	retries := 0
	for {
		step, err := r.Next()
		if err != nil {
			return run.Response{}, err
		}
		switch s := step.(type) {
		case run.CallModel:
			resp, err := m.Generate(ctx, s.Request)
			if err != nil {
				return run.Response{}, err
			}
			resp.Raw = nil
			err = r.ModelResponse(resp)
		case run.ResolveToolCall:
			res := ResolveInvalid(s, cfg.MaxInvalidRetries-retries)
			if _, ok := res.(run.Retry); ok {
				retries++
			}
			err = r.Resolve(res)
		case run.ApproveTools:
			var ds []run.Decision
			ask := run.ApproveTools{Turn: s.Turn}
			for _, c := range s.Calls {
				if tl, ok := tools.Lookup(c.Call.Name); ok && !tool.NeedsApproval(tl, c.Call.Args()) {
					ds = append(ds, run.Decision{CallID: c.Call.ID, Action: run.Approved})
				} else {
					ask.Calls = append(ask.Calls, c)
				}
			}
			if len(ask.Calls) > 0 {
				ds = append(ds, decide(ask)...)
			}
			err = r.Approve(ds)
		case run.CallTools:
			results := make([]llm.ToolResult, len(s.Calls))
			for i, c := range s.Calls {
				if c.Result != nil {
					results[i] = *c.Result
					continue
				}
				if results[i], err = tools.Call(ctx, c.Call); err != nil {
					return run.Response{}, err
				}
			}
			err = r.ToolResults(results)
		case run.Done:
			return s.Response, nil
		}
		if err != nil && r.Err() != nil {
			return run.Response{}, r.Err()
		}
		if err != nil {
			t.Fatalf("protocol error in the reference loop: %v", err)
		}
	}
}

// sameResponse fails t unless a and b encode to the same JSON.
func sameResponse(t testing.TB, a, b run.Response) {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("responses differ:\n in-process: %s\n temporal:   %s", clip(ja), clip(jb))
	}
}

func clip(b []byte) string {
	if len(b) > 3000 {
		return string(b[:1500]) + " ... " + string(b[len(b)-1500:])
	}
	return string(b)
}

// sameMessages fails t unless a and b are equal message lists.
func sameMessages(t testing.TB, what string, a, b []llm.Message) {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("%s differ:\n want %s\n got  %s", what, clip(ja), clip(jb))
	}
}

// sizeRecorder is a DataConverter that records the size of every payload
// it makes: what the workflow and activities put into history.
type sizeRecorder struct {
	converter.DataConverter
	mu    sync.Mutex
	max   int
	total int64
	count int
}

func newSizeRecorder() *sizeRecorder {
	return &sizeRecorder{DataConverter: converter.GetDefaultDataConverter()}
}

func (s *sizeRecorder) record(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.max = max(s.max, n)
	s.total += int64(n)
	s.count++
}

func (s *sizeRecorder) ToPayloads(values ...any) (*commonpb.Payloads, error) {
	p, err := s.DataConverter.ToPayloads(values...)
	if err == nil {
		for _, pl := range p.GetPayloads() {
			s.record(payloadSize(pl))
		}
	}
	return p, err
}

func (s *sizeRecorder) ToPayload(value any) (*commonpb.Payload, error) {
	p, err := s.DataConverter.ToPayload(value)
	if err == nil {
		s.record(payloadSize(p))
	}
	return p, err
}

func (s *sizeRecorder) stats() (maxSize int, total int64, count int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max, s.total, s.count
}

// deepEqual is reflect.DeepEqual with a readable failure.
func deepEqual(t testing.TB, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %#v, want %#v", what, got, want)
	}
}

func contains(t testing.TB, what, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%s %q does not contain %q", what, s, sub)
	}
}

func payloadSize(p *commonpb.Payload) int { return proto.Size(p) }

type testsuiteEnv = testsuite.TestWorkflowEnvironment

type retryPolicy = temporal.RetryPolicy

func errorsAs(err error, target any) bool { return errors.As(err, target) }

type (
	activityInfo  = activity.Info
	encodedValues = converter.EncodedValues
)

// newBareEnv returns a test environment with nothing registered.
func newBareEnv(t testing.TB) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger{})
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(2 * time.Minute)
	// The race detector makes JSON ten times slower: restoring a carried
	// transcript of a megabyte then takes seconds of workflow code.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	return env
}

func activityOptions(name string) activity.RegisterOptions {
	return activity.RegisterOptions{Name: name}
}

// quietLogger drops the SDK's debug and info logs; warnings and errors
// go to the test log... of nobody: tests assert on outcomes instead.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
