package llm

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func fold(evs ...Event) Response {
	var a Accumulator
	for _, e := range evs {
		a.Add(e)
	}
	return a.Response()
}

func calls(t *testing.T, r Response) []ToolCall {
	t.Helper()
	return r.ToolCalls()
}

func TestAccumulatorInterleavedParallelCalls(t *testing.T) {
	r := fold(
		ToolCallStart{Index: 0, ID: "a", Name: "read_file"},
		ToolCallStart{Index: 1, ID: "b", Name: "grep"},
		ToolCallDelta{Index: 0, Arguments: `{"pa`},
		ToolCallDelta{Index: 1, Arguments: `{"pat`},
		ToolCallDelta{Index: 0, Arguments: `th":"x.go"}`},
		ToolCallDelta{Index: 1, Arguments: `tern":"y"}`},
		Finish{Reason: FinishToolCalls},
	)
	want := []ToolCall{
		{ID: "a", Name: "read_file", Arguments: `{"path":"x.go"}`},
		{ID: "b", Name: "grep", Arguments: `{"pattern":"y"}`},
	}
	if got := calls(t, r); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls = %+v\nwant %+v", got, want)
	}
	if r.Truncated || r.FinishReason != FinishToolCalls {
		t.Fatalf("truncated=%v finish=%q", r.Truncated, r.FinishReason)
	}
}

func TestAccumulatorIndexReusedForNewID(t *testing.T) {
	r := fold(
		ToolCallStart{Index: 0, ID: "a", Name: "one", Arguments: `{"n":1}`},
		ToolCallStart{Index: 0, ID: "b", Name: "two"},
		ToolCallDelta{Index: 0, Arguments: `{"n":2}`},
		Finish{Reason: FinishToolCalls},
	)
	want := []ToolCall{
		{ID: "a", Name: "one", Arguments: `{"n":1}`},
		{ID: "b", Name: "two", Arguments: `{"n":2}`},
	}
	if got := calls(t, r); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls = %+v\nwant %+v", got, want)
	}
}

func TestAccumulatorSplitNameAndArgumentsInFirstChunk(t *testing.T) {
	r := fold(
		ToolCallStart{Index: 3, ID: "c", Name: "read_", Arguments: `{"path":`},
		ToolCallDelta{Index: 3, Name: "file", Arguments: `"a"}`},
		Finish{Reason: FinishToolCalls},
	)
	want := []ToolCall{{ID: "c", Name: "read_file", Arguments: `{"path":"a"}`}}
	if got := calls(t, r); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls = %+v\nwant %+v", got, want)
	}
}

func TestAccumulatorRepeatedStartKeepsName(t *testing.T) {
	// Some servers repeat the id and full name on every chunk.
	r := fold(
		ToolCallStart{Index: 0, ID: "c", Name: "grep", Arguments: `{"a":`},
		ToolCallStart{Index: 0, ID: "c", Name: "grep", Arguments: `1}`},
		Finish{},
	)
	want := []ToolCall{{ID: "c", Name: "grep", Arguments: `{"a":1}`}}
	if got := calls(t, r); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls = %+v\nwant %+v", got, want)
	}
}

func TestAccumulatorDeltaWithoutStartOpensCall(t *testing.T) {
	r := fold(ToolCallDelta{Index: 1000, Name: "x", Arguments: `{}`}, Finish{})
	want := []ToolCall{{Name: "x", Arguments: `{}`}}
	if got := calls(t, r); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls = %+v\nwant %+v", got, want)
	}
}

func TestAccumulatorArguments(t *testing.T) {
	cases := []struct {
		name, in, want string
		malformed      bool
	}{
		{"empty becomes object", "", "{}", false},
		{"blank becomes object", "  \n", "{}", false},
		{"object kept", `{"a":1}`, `{"a":1}`, false},
		{"glued copies reduced", `{"a":1}{"a":1}`, `{"a":1}`, false},
		{"glued copies differing in space", `{"a": 1} {"a":1}`, `{"a": 1}`, false},
		{"empty placeholder then object", `{}{"a":1}`, `{"a":1}`, false},
		{"two empties", `{}{}`, "{}", false},
		{"glued different objects refused", `{"a":1}{"b":2}`, `{"a":1}{"b":2}`, true},
		{"trailing comma refused", `{"path": "a.go",}`, `{"path": "a.go",}`, true},
		{"array refused", `[1]`, `[1]`, true},
		{"string refused", `"x"`, `"x"`, true},
		{"object then garbage refused", `{"a":1}x`, `{"a":1}x`, true},
		{"object then array refused", `{"a":1}[]`, `{"a":1}[]`, true},
		{"cut object refused", `{"a":`, `{"a":`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := fold(ToolCallStart{Index: 0, ID: "x", Name: "t", Arguments: c.in}, Finish{})
			got := r.ToolCalls()[0]
			if got.Arguments != c.want || got.Malformed != c.malformed {
				t.Fatalf("arguments %q malformed=%v, want %q malformed=%v", got.Arguments, got.Malformed, c.want, c.malformed)
			}
			if !c.malformed && got.ArgumentsError() != nil {
				t.Fatalf("normalized arguments do not check: %v", got.ArgumentsError())
			}
			if c.malformed && got.ArgumentsError() == nil && strings.TrimSpace(c.in) != "" {
				t.Fatalf("malformed arguments pass ArgumentsError")
			}
		})
	}
}

func TestAccumulatorUsageKeepsLastPerField(t *testing.T) {
	r := fold(
		UsageReport{Usage: Usage{InputTokens: 10, OutputTokens: 1, CacheReadTokens: 4}},
		UsageReport{Usage: Usage{OutputTokens: 5}},
		UsageReport{Usage: Usage{OutputTokens: 7}},
		Finish{Reason: FinishStop},
	)
	want := Usage{InputTokens: 10, OutputTokens: 7, CacheReadTokens: 4}
	if r.Usage != want {
		t.Fatalf("usage = %+v, want %+v", r.Usage, want)
	}
}

func TestAccumulatorNoFinishIsTruncated(t *testing.T) {
	r := fold(
		TextDelta{Text: "Let me look."},
		ToolCallStart{Index: 0, ID: "a", Name: "read_file", Arguments: `{"path":"a"}`},
		ToolCallEnd{Index: 0},
		ToolCallStart{Index: 1, ID: "b", Name: "read_file", Arguments: `{"pa`},
	)
	if !r.Truncated {
		t.Fatal("response without finish is not marked truncated")
	}
	for _, c := range r.ToolCalls() {
		if !c.Incomplete {
			t.Fatalf("call %s of a truncated stream is not marked incomplete", c.ID)
		}
	}
	if r.Text() != "Let me look." {
		t.Fatalf("text = %q", r.Text())
	}
}

func TestAccumulatorLengthFinishMarksOpenCallsIncomplete(t *testing.T) {
	r := fold(
		ToolCallStart{Index: 0, ID: "a", Name: "t", Arguments: `{}`},
		ToolCallEnd{Index: 0},
		ToolCallStart{Index: 1, ID: "b", Name: "t", Arguments: `{"x":"abc`},
		Finish{Reason: FinishLength},
	)
	cs := r.ToolCalls()
	if cs[0].Incomplete {
		t.Fatal("a call the provider closed is marked incomplete")
	}
	if !cs[1].Incomplete || !cs[1].Malformed {
		t.Fatalf("open call at length finish: incomplete=%v malformed=%v", cs[1].Incomplete, cs[1].Malformed)
	}
	if r.Truncated {
		t.Fatal("a finished response is marked truncated")
	}
}

func TestAccumulatorPartsKeepOrder(t *testing.T) {
	r := fold(
		ResponseStart{ID: "msg_1", Model: "m", RequestID: "req"},
		ThinkingDelta{Text: "hmm "},
		ThinkingDelta{Text: "ok", Signature: "sig"},
		TextDelta{Text: "Hel"},
		TextDelta{Text: "lo"},
		ToolCallStart{Index: 2, ID: "t1", Name: "bash"},
		ToolCallEnd{Index: 2},
		TextDelta{Text: "after"},
		ThinkingDelta{Start: true, Redacted: "xyz"},
		Finish{Reason: FinishToolCalls},
	)
	want := Message{Role: RoleAssistant, Parts: []Part{
		Thinking{Text: "hmm ok", Signature: "sig"},
		Text{Text: "Hello"},
		ToolCall{ID: "t1", Name: "bash", Arguments: "{}"},
		Text{Text: "after"},
		Thinking{Redacted: "xyz"},
	}}
	if !reflect.DeepEqual(r.Message, want) {
		t.Fatalf("message = %+v\nwant %+v", r.Message, want)
	}
	if r.ID != "msg_1" || r.Model != "m" || r.RequestID != "req" {
		t.Fatalf("identity = %q %q %q", r.ID, r.Model, r.RequestID)
	}
}

func TestAccumulatorResponseIsRepeatable(t *testing.T) {
	var a Accumulator
	a.Add(TextDelta{Text: "a"})
	first := a.Response()
	a.Add(TextDelta{Text: "b"})
	a.Add(Finish{})
	if first.Text() != "a" || a.Response().Text() != "ab" {
		t.Fatalf("texts %q %q", first.Text(), a.Response().Text())
	}
}

func FuzzAccumulator(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}, `{"a":1}`)
	f.Add([]byte{3, 3, 4, 4, 5, 7}, `{}{"b":2}`)
	f.Add([]byte{1, 2, 1, 2, 3}, "")
	f.Fuzz(func(t *testing.T, ops []byte, s string) {
		var a Accumulator
		for i, op := range ops {
			idx := int(int8(op >> 3)) // negative and sparse indexes too
			switch op % 8 {
			case 0:
				a.Add(ResponseStart{ID: s})
			case 1:
				a.Add(TextDelta{Text: s})
			case 2:
				a.Add(ThinkingDelta{Start: i%2 == 0, Text: s, Signature: s})
			case 3:
				a.Add(ToolCallStart{Index: idx, ID: s[:min(len(s), i%4)], Name: "n", Arguments: s})
			case 4:
				a.Add(ToolCallDelta{Index: idx, Name: s[:min(len(s), 1)], Arguments: s})
			case 5:
				a.Add(ToolCallEnd{Index: idx})
			case 6:
				a.Add(UsageReport{Usage: Usage{InputTokens: int64(i), OutputTokens: int64(len(s))}})
			case 7:
				a.Add(Finish{Reason: FinishReason(s[:min(len(s), 3)])})
			}
		}
		r := a.Response()
		for _, c := range r.ToolCalls() {
			if !c.Malformed {
				var v map[string]any
				if err := json.Unmarshal([]byte(c.Arguments), &v); err != nil {
					t.Fatalf("call %+v not malformed but arguments do not parse: %v", c, err)
				}
			}
			if r.Truncated && !c.Incomplete {
				t.Fatalf("truncated response holds a complete call %+v", c)
			}
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("response does not encode: %v", err)
		}
	})
}

func BenchmarkAccumulate1MB(b *testing.B) {
	// 1 MB of text in 64-byte deltas, plus a tool call with 64 KB of
	// arguments in 256-byte pieces: a long streamed answer.
	chunk := strings.Repeat("x", 64)
	arg := strings.Repeat("y", 256)
	b.SetBytes(1<<20 + 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		var a Accumulator
		for range (1 << 20) / 64 {
			a.Add(TextDelta{Text: chunk})
		}
		a.Add(ToolCallStart{Index: 0, ID: "c", Name: "write_file", Arguments: `{"content":"`})
		for range (1 << 16) / 256 {
			a.Add(ToolCallDelta{Index: 0, Arguments: arg})
		}
		a.Add(ToolCallDelta{Index: 0, Arguments: `"}`})
		a.Add(Finish{Reason: FinishToolCalls})
		if r := a.Response(); r.ToolCalls()[0].Malformed {
			b.Fatal("benchmark arguments do not parse")
		}
	}
}

// A count reported as zero replaces an earlier report of it; one left out
// keeps it. (An Anthropic stream's message_start may report cache reads
// that its final, cumulative message_delta reports as 0.)
func TestAccumulatorUsageReportedZeroReplaces(t *testing.T) {
	r := fold(
		UsageReport{Usage: Usage{InputTokens: 61_000, CacheReadTokens: 55_096, OutputTokens: 1}, Reported: UsageInput | UsageCacheRead | UsageCacheWrite | UsageOutput},
		UsageReport{Usage: Usage{OutputTokens: 40}, Reported: UsageOutput},
		UsageReport{Usage: Usage{InputTokens: 5_904, OutputTokens: 812}, Reported: UsageInput | UsageCacheRead | UsageCacheWrite | UsageOutput},
		Finish{Reason: FinishStop},
	)
	want := Usage{InputTokens: 5_904, OutputTokens: 812}
	if r.Usage != want {
		t.Fatalf("usage = %+v, want %+v", r.Usage, want)
	}
}

func TestUsageReportApply(t *testing.T) {
	before := Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5}
	for _, c := range []struct {
		name string
		r    UsageReport
		want Usage
	}{
		{"nothing reported keeps all", UsageReport{Reported: 0}, before},
		{"unsaid: the non-zero counts", UsageReport{Usage: Usage{OutputTokens: 9}}, Usage{InputTokens: 1, OutputTokens: 9, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5}},
		{"reported zeros replace", UsageReport{Usage: Usage{OutputTokens: 9}, Reported: UsageOutput | UsageReasoning}, Usage{InputTokens: 1, OutputTokens: 9, CacheReadTokens: 3, CacheWriteTokens: 4}},
		{"all", UsageReport{Reported: AllUsageFields}, Usage{}},
	} {
		if got := c.r.Apply(before); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestUsageFieldsJSON(t *testing.T) {
	data, err := MarshalEvent(UsageReport{Usage: Usage{OutputTokens: 2}, Reported: UsageOutput | UsageCacheWrite})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"usage","usage":{"output_tokens":2},"reported":["output_tokens","cache_write_tokens"]}`; string(data) != want {
		t.Fatalf("got %s, want %s", data, want)
	}
	if _, err := UnmarshalEvent([]byte(`{"type":"usage","usage":{},"reported":["output_tokens","audio_tokens"]}`)); err == nil || !strings.Contains(err.Error(), "audio_tokens") {
		t.Fatalf("an unknown count name: err = %v", err)
	}
	if _, err := MarshalEvent(UsageReport{Reported: 1 << 7}); err == nil {
		t.Fatal("an unknown member was encoded")
	}
}

// Folding a usage report allocates nothing.
func TestAccumulatorUsageAllocations(t *testing.T) {
	var a Accumulator
	ev := Event(UsageReport{Usage: Usage{InputTokens: 5, OutputTokens: 7}, Reported: AllUsageFields})
	if n := testing.AllocsPerRun(100, func() { a.Add(ev) }); n != 0 {
		t.Fatalf("%v allocations per usage report", n)
	}
}
