package run_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/run/runtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenRuns builds one run per state to pin, deterministically.
func goldenRuns(t testing.TB) map[string]*run.Run {
	temp := 0.5
	cfg := func() run.Config {
		return run.Config{
			Model: "test-model", System: "You are terse.",
			Input:  []llm.Message{prompt("earlier question"), llm.AssistantText("earlier answer")},
			Prompt: prompt("clean up and report"),
			Tools: []llm.ToolSpec{
				{Name: "search", Description: "Search files.", Schema: json.RawMessage(`{"type":"object"}`), Effect: llm.EffectReadOnly},
				{Name: "delete_file", Description: "Delete a file.", NeedsApproval: true},
			},
			MaxTurns: run.Turns(4), MaxInvalidRetries: 1, MaxTokens: 512, Temperature: &temp,
		}
	}
	out := map[string]*run.Run{}
	mk := func(name string, drive func(s *runtest.Script)) {
		r := run.New(cfg())
		drive(runtest.New(t, r))
		out[name] = r
	}
	turn1 := func(s *runtest.Script) {
		s.CallModel()
		a := runtest.Answer(llm.Thinking{Text: "look first", Signature: "sig"}, llm.Text{Text: "Searching."}, runtest.Call("toolu_1", "search", `{"q":"*.tmp"}`))
		a.Usage, a.ID, a.RequestID = llm.Usage{InputTokens: 120, OutputTokens: 30, CacheReadTokens: 100}, "msg_1", "req_1"
		s.Reply(a)
		ct := s.CallTools()
		s.Results(runtest.Answers(ct.Calls, func(llm.ToolCall) llm.ToolResult { return llm.ToolResult{Content: "a.tmp\nb.tmp"} })...)
	}
	mk("preparing", func(s *runtest.Script) {
		turn1(s)
		if err := s.R.WrapUp("Report now."); err != nil {
			t.Fatal(err)
		}
	})
	mk("awaiting_model", func(s *runtest.Script) { turn1(s); s.CallModel() })
	mk("resolving", func(s *runtest.Script) {
		turn1(s)
		s.CallModel()
		s.ReplyCalls(runtest.Call("", "Delete-File", `{"path":"a.tmp"}`), runtest.Call("", "serch", `{}`))
		s.ResolveToolCall()
		s.Resolve(run.Repair{Name: "delete_file"})
		s.ResolveToolCall()
	})
	mk("approving", func(s *runtest.Script) {
		turn1(s)
		s.CallModel()
		s.ReplyCalls(runtest.Call("toolu_2", "delete_file", `{"path":"a.tmp"}`), runtest.Call("toolu_3", "delete_file", `{"path":`), runtest.Call("toolu_4", "delete_file", `{"path":"b.tmp"}`))
		s.ApproveTools()
	})
	mk("advancing", func(s *runtest.Script) {
		turn1(s)
		s.CallModel()
		s.ReplyText("Deleted nothing yet.")
	})
	mk("executing", func(s *runtest.Script) {
		turn1(s)
		s.CallModel()
		s.ReplyCalls(runtest.Call("toolu_2", "delete_file", `{"path":"a.tmp"}`), runtest.Call("toolu_3", "delete_file", `{"path":"b.tmp"}`))
		s.ApproveTools()
		s.Approve(run.Decision{CallID: "toolu_2", Action: run.Approved}, run.Decision{CallID: "toolu_3", Action: run.Denied, Reason: "b.tmp is needed"})
		s.CallTools()
	})
	mk("done", func(s *runtest.Script) {
		turn1(s)
		s.CallModel()
		a := runtest.Answer(llm.Text{Text: "Found a.tmp and b.tmp."})
		a.Usage, a.Raw = llm.Usage{InputTokens: 200, OutputTokens: 12}, json.RawMessage(`{"provider":"body"}`)
		s.Reply(a)
		s.Done()
	})
	mk("failed", func(s *runtest.Script) {
		turn1(s)
		s.CallModel()
		s.ReplyCalls(runtest.Call("toolu_9", "rm_rf", `{}`))
		s.ResolveToolCall()
		if err := s.R.Resolve(run.Fail{}); !errors.Is(err, run.ErrUnknownTool) {
			t.Fatal(err)
		}
	})
	return out
}

// Golden files pin format 1 at every state, and each restores to a run
// that encodes to the same bytes.
func TestGoldenSnapshots(t *testing.T) {
	wantState := map[string]string{
		"preparing": run.StatePreparingRequest, "awaiting_model": run.StateAwaitingModel,
		"resolving": run.StateResolvingToolCalls, "approving": run.StateAwaitingApproval,
		"advancing": run.StateAwaitingAdvance, "executing": run.StateExecutingTools,
		"done": run.StateDone, "failed": run.StateFailed,
	}
	runs := goldenRuns(t)
	if len(runs) != len(wantState) {
		t.Fatalf("%d golden runs", len(runs))
	}
	for name, r := range runs {
		if r.State() != wantState[name] {
			t.Fatalf("%s: state %s", name, r.State())
		}
		got, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join("testdata", "snapshot_"+name+".json")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./run -run Golden -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: snapshot changed (format 1 is pinned; a change needs a new format number):\n got %s\nwant %s", name, got, want)
			continue
		}
		var restored run.Run
		if err := json.Unmarshal(want, &restored); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, _ := json.MarshalIndent(&restored, "", "  ")
		if !bytes.Equal(append(again, '\n'), want) {
			t.Errorf("%s: restored run encodes differently:\n%s", name, again)
		}
		if restored.State() != r.State() || restored.Turn() != r.Turn() || restored.Usage() != r.Usage() {
			t.Errorf("%s: restored getters differ", name)
		}
	}
}

// A restored run continues like the original.
func TestGoldenRunsContinue(t *testing.T) {
	for name, r := range goldenRuns(t) {
		data, err := os.ReadFile(filepath.Join("testdata", "snapshot_"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var restored run.Run
		if err := json.Unmarshal(data, &restored); err != nil {
			t.Fatal(err)
		}
		d := runtest.Driver{
			Model:   func(run.CallModel) (llm.Response, error) { return runtest.Answer(llm.Text{Text: "end"}), nil },
			Resolve: func(rc run.ResolveToolCall) run.Resolution { return run.Repair{Name: "search"} },
		}
		if cm, ok := r.ModelCall(); ok { // AwaitingModel: answer the awaited call first
			cm2, _ := restored.ModelCall()
			if snapshot(t, r) != snapshot(t, &restored) || cm.Turn != cm2.Turn {
				t.Fatalf("%s: ModelCall differs", name)
			}
			for _, x := range []*run.Run{r, &restored} {
				if err := x.ModelResponse(runtest.Answer(llm.Text{Text: "end"})); err != nil {
					t.Fatal(err)
				}
			}
		}
		a, _, errA := d.Drive(r)
		b, _, errB := d.Drive(&restored)
		if (errA == nil) != (errB == nil) || (errA != nil && errA.Error() != errB.Error()) {
			t.Fatalf("%s: errors differ: %v / %v", name, errA, errB)
		}
		if ja, jb := mustJSON(t, a), mustJSON(t, b); ja != jb {
			t.Fatalf("%s: responses differ:\n%s\n%s", name, ja, jb)
		}
	}
}

func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// SEMANTICS §8: other formats and unknown fields are refused with a
// message naming both formats.
func TestSnapshotRefusals(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "snapshot_executing.json"))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) string {
		if !strings.Contains(string(good), old) {
			t.Fatalf("golden lacks %q", old)
		}
		return strings.Replace(string(good), old, new, 1)
	}
	cases := map[string]struct {
		doc   string
		wants []string
	}{
		"format 2":               {edit(`"format": 1`, `"format": 2`), []string{"format 2", "format 1"}},
		"format 0":               {edit(`"format": 1`, `"format": 0`), []string{"format 0", "format 1"}},
		"no format":              {`{"state":"Done"}`, []string{"no \"format\"", "format 1"}},
		"unknown top field":      {edit(`"format": 1,`, `"format": 1, "entries": [],`), []string{"entries", "format 1"}},
		"unknown config field":   {edit(`"config": {`, `"config": {"hooks": 1,`), []string{"hooks", "format 1"}},
		"unknown part type":      {edit(`"type": "text"`, `"type": "audio"`), []string{"audio"}},
		"not JSON":               {`{"format":1,`, []string{"format 1"}},
		"array":                  {`[]`, []string{"not a run snapshot"}},
		"unknown state":          {edit(`"state": "ExecutingTools"`, `"state": "Sleeping"`), []string{"Sleeping"}},
		"pending in wrong state": {edit(`"state": "ExecutingTools"`, `"state": "PreparingRequest"`), []string{"pending"}},
		"turn over budget":       {edit(`"turn": 2`, `"turn": 9`), []string{"budget"}},
		"pending id mismatch":    {edit(`"id": "toolu_3",`, `"id": "toolu_x",`), []string{"pending"}},
		"trailing data":          {string(good) + "{}", []string{"trailing"}},
	}
	for name, c := range cases {
		// Call UnmarshalJSON directly: json.Unmarshal refuses invalid JSON
		// itself before asking the Run.
		var r run.Run
		err := r.UnmarshalJSON([]byte(c.doc))
		var se *run.SnapshotError
		if !errors.As(err, &se) || !errors.Is(err, run.ErrSnapshot) {
			t.Errorf("%s: err = %v", name, err)
			continue
		}
		for _, w := range c.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", name, err, w)
			}
		}
	}
}

// A failed Unmarshal leaves the target as it was.
func TestFailedRestoreLeavesTheRunAlone(t *testing.T) {
	r := runIn(t, run.StateExecutingTools)
	before := snapshot(t, r)
	if err := json.Unmarshal([]byte(`{"format":7}`), r); err == nil {
		t.Fatal("format 7 accepted")
	}
	if snapshot(t, r) != before {
		t.Fatal("a refused snapshot changed the run")
	}
}

func TestZeroRunDoesNotEncode(t *testing.T) {
	if _, err := json.Marshal(&run.Run{}); err == nil {
		t.Fatal("a zero Run encoded")
	}
}

// A run that failed on its config still saves and restores.
func TestConfigFailureRoundTrips(t *testing.T) {
	r := run.New(run.Config{Prompt: prompt("x"), ToolChoice: llm.ToolChoice{Mode: llm.ToolRequired}})
	nr, err := runtest.RoundTrip(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nr.Next(); !errors.Is(err, run.ErrConfig) {
		t.Fatalf("err = %v", err)
	}
}

func TestResolutionJSON(t *testing.T) {
	cases := map[string]run.Resolution{
		`{"type":"fail"}`:                       run.Fail{},
		`{"type":"retry","feedback":"use add"}`: run.Retry{Feedback: "use add"},
		`{"type":"repair","name":"search"}`:     run.Repair{Name: "search"},
		`{"type":"skip","reason":"not a tool"}`: run.Skip{Reason: "not a tool"},
		`{"type":"stop","reason":"dangerous"}`:  run.Stop{Reason: "dangerous"},
		`{"type":"retry","feedback":""}`:        run.Retry{},
	}
	for want, res := range cases {
		got, err := run.MarshalResolution(res)
		if err != nil || string(got) != want {
			t.Errorf("MarshalResolution(%#v) = %s, %v; want %s", res, got, err, want)
		}
		back, err := run.UnmarshalResolution([]byte(want))
		if err != nil || back != res {
			t.Errorf("UnmarshalResolution(%s) = %#v, %v", want, back, err)
		}
	}
	for _, bad := range []string{`{"type":"explode"}`, `{"type":"repair","reason":"x"}`, `{"type":"fail","name":"x"}`, `{"type":"skip","extra":1}`, `[]`, `{}`} {
		if _, err := run.UnmarshalResolution([]byte(bad)); err == nil {
			t.Errorf("UnmarshalResolution(%s) accepted", bad)
		}
	}
	if _, err := run.MarshalResolution(nil); err == nil {
		t.Error("nil resolution encoded")
	}
}

// Encoding a Run value writes the same snapshot as encoding the pointer.
func TestMarshalValueAndPointerAgree(t *testing.T) {
	r := runIn(t, run.StateExecutingTools)
	a, err1 := json.Marshal(r)
	b, err2 := json.Marshal(*r)
	if err1 != nil || err2 != nil || string(a) != string(b) || !strings.HasPrefix(string(a), `{"format":1,`) {
		t.Fatalf("pointer %s (%v)\nvalue   %s (%v)", a, err1, b, err2)
	}
}
