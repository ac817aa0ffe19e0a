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
