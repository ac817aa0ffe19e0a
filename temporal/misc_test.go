package temporal

import (
	"encoding/json"
	"errors"
	"go/build"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/run"
)

// A run's snapshot taken apart by splitSnapshot and put together by
// joinSnapshot restores the same run.
func TestSnapshotSplitJoin(t *testing.T) {
	input := []llm.Message{llm.UserText("before"), llm.AssistantText("ok")}
	r := run.New(run.Config{Input: input, Prompt: llm.UserText("now"), System: "s", MaxTurns: run.Turns(3)})
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if err := r.ModelResponse(llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "c1", Name: "x", Arguments: "{}"}}}, FinishReason: llm.FinishToolCalls}); err != nil {
		t.Fatal(err)
	}
	snap, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	skel, err := splitSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(skel), "before") || strings.Count(string(skel), `"now"`) != 1 {
		t.Fatalf("the skeleton holds messages: %s", skel)
	}
	joined, err := joinSnapshot(skel, r.History(), len(input))
	if err != nil {
		t.Fatal(err)
	}
	var back run.Run
	if err := json.Unmarshal(joined, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(&back)
	if string(again) != string(snap) {
		t.Fatalf("restored run differs:\n %s\n %s", snap, again)
	}
	for _, bad := range []string{`{}`, `{"format":2,"messages":[],"config":{}}`, `{"format":1,"config":{}}`, `{"format":1,"messages":[]}`, `[]`} {
		if _, err := splitSnapshot([]byte(bad)); err == nil {
			t.Errorf("splitSnapshot(%s) accepted it", bad)
		}
	}
	if _, err := joinSnapshot(skel, r.History(), 99); err == nil {
		t.Fatal("joinSnapshot took more input messages than there are")
	}
}

// A Result round-trips through JSON, also with the zero final message of
// a cancelled run (which llm.Message alone cannot decode).
func TestResultJSON(t *testing.T) {
	for _, res := range []Result{
		{Response: run.Response{Messages: []llm.Message{llm.UserText("hi")}}, Omitted: 0},
		{Response: run.Response{Output: "x", Message: llm.AssistantText("x"), Messages: []llm.Message{llm.UserText("hi"), llm.AssistantText("x")}, Usage: llm.Usage{InputTokens: 3}, Calls: []run.CallRecord{{Index: 0, Turn: 1}}}},
		{Response: run.Response{Output: "x"}, Omitted: 7},
	} {
		data, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var back Result
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(data) {
			t.Fatalf("round trip:\n %s\n %s", data, again)
		}
	}
}

func TestEventLog(t *testing.T) {
	var l eventLog
	if p := l.page(0); len(p.Events) != 0 || p.Next != 1 {
		t.Fatalf("empty log: %+v", p)
	}
	long := strings.Repeat("é", PreviewBytes)
	for i := range keepEvents + 10 {
		l.add(Event{Kind: EventToolResult, Text: long, Result: &llm.ToolResult{Content: long}, Turn: i})
	}
	p := l.page(0)
	if p.Missed == 0 || p.Events[0].Seq != p.Missed+1 || p.Next != keepEvents+11 {
		t.Fatalf("page after overflow: missed %d, first %d, next %d", p.Missed, p.Events[0].Seq, p.Next)
	}
	for _, e := range p.Events {
		if len(e.Text) > PreviewBytes+len("…") || !strings.HasSuffix(e.Result.Content, "…") || !json.Valid(mustJSON(t, e)) {
			t.Fatalf("event %d not cut: %d bytes", e.Seq, len(e.Text))
		}
	}
	if p := l.page(int64(keepEvents + 10)); len(p.Events) != 0 || p.Next != keepEvents+11 {
		t.Fatalf("page at the end: %+v", p)
	}
	if len(l.tail()) != carryEvents {
		t.Fatalf("tail of %d events", len(l.tail()))
	}
}

func mustJSON(t *testing.T, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Every model.Error crosses Temporal with its kind, retry verdict,
// status and retry-after, redacted.
func TestModelFailureEncoding(t *testing.T) {
	err := modelFailure(&model.Error{Kind: model.KindRateLimited, Status: 429, Message: "slow down, key sk-abcdefghijklmnopqrstuvwxyz123456", RetryAfter: 3 * time.Second, RequestID: "req_1"})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != "loom.model.rate_limited" || ae.NonRetryable() || ae.NextRetryDelay() != 3*time.Second {
		t.Fatalf("application error %v", err)
	}
	if strings.Contains(ae.Message(), "sk-abcdefghijklmnopqrstuvwxyz123456") {
		t.Fatal("a key crossed into the history")
	}
	var me *model.Error
	if !errors.As(decodeError(err), &me) || me.Kind != model.KindRateLimited || me.Status != 429 || me.RetryAfter != 3*time.Second || me.RequestID != "req_1" || !me.Retryable() {
		t.Fatalf("decoded %#v", me)
	}
	err = modelFailure(&model.Error{Kind: model.KindQuota, Status: 429})
	if !errors.As(err, &ae) || !ae.NonRetryable() || ae.Type() != "loom.model.quota_exhausted" {
		t.Fatalf("quota: %v", err)
	}
	// Every machine failure comes back as itself, inside *run.FailedError.
	for _, e := range []error{&run.MaxTurnsError{MaxTurns: 3}, &run.UnknownToolError{Name: "x", CallID: "c", Allowed: []string{"a"}}, &run.StoppedError{Reason: "r"}, &run.TruncatedError{FinishReason: llm.FinishLength}, &run.ConfigError{Field: "f", Reason: "r"}} {
		f := encodeRunFailure(&run.FailedError{Err: e})
		back := decodeError(appError("x", ErrorTypeRunPrefix+f.Type, roundTrip(t, f)))
		if !errors.Is(back, run.ErrFailed) || back.(*run.FailedError).Err.Error() != e.Error() {
			t.Errorf("%T came back as %v", e, back)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.ModelTimeout <= 0 || o.ToolHeartbeat <= 0 || o.ModelRetry.MaximumAttempts == 0 || o.ParallelTools != 4 || o.HistoryBytes <= 0 || o.ResultBytes <= 0 || o.InlineCarryBytes <= 0 {
		t.Fatalf("defaults %+v", o)
	}
	custom := Options{ParallelTools: 9, HistoryBytes: -1, ToolRetry: &temporal.RetryPolicy{MaximumAttempts: 1}}.withDefaults()
	if custom.ParallelTools != 9 || custom.HistoryBytes != -1 || custom.ToolRetry.MaximumAttempts != 1 {
		t.Fatalf("overrides lost: %+v", custom)
	}
}

// The package imports only what DESIGN.md allows: run, llm, model and
// tool of ours (never agent), and the Temporal SDK.
func TestDependencies(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{
		"github.com/loomkit/loom/llm":   true,
		"github.com/loomkit/loom/run":   true,
		"github.com/loomkit/loom/model": true,
		"github.com/loomkit/loom/tool":  true,
	}
	for _, imp := range pkg.Imports {
		switch {
		case strings.HasPrefix(imp, "github.com/loomkit/loom/"):
			if !allowed[imp] {
				t.Errorf("temporal imports %s; it may import only run, llm, model and tool of loom (it must not import agent: DESIGN.md)", imp)
			}
		case strings.HasPrefix(imp, "go.temporal.io/"), !strings.Contains(strings.Split(imp, "/")[0], "."):
		default:
			t.Errorf("temporal imports %s, a module it does not need", imp)
		}
	}
}
