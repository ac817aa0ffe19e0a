package llm

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func sampleMessages() []Message {
	return []Message{
		UserText("fix the build"),
		{Role: RoleAssistant, Parts: []Part{
			Thinking{Text: "look first", Signature: "c2ln"},
			Thinking{Redacted: "opaque"},
			Text{Text: "Reading."},
			ToolCall{ID: "call_1", Name: "read_file", Arguments: `{"path":"main.go"}`},
			ToolCall{ID: "call_1_2", Name: "bash", Arguments: `{"command":`, Malformed: true, Incomplete: true, ProviderID: "call_1"},
		}},
		{Role: RoleUser, Parts: []Part{
			ToolResult{CallID: "call_1", Name: "read_file", Content: "1\tpackage main"},
			ToolResult{CallID: "call_1_2", Name: "bash", Content: "arguments are not valid JSON", IsError: true},
			ToolResult{CallID: "call_1_3", Name: "screenshot", Content: "[image 1: image/png, 4 bytes]", Images: []Image{
				{Data: []byte{0x89, 'P', 'N', 'G'}, MediaType: "image/png"},
				{URL: "https://example.com/b.jpg"},
			}},
			Text{Text: "also look at this"},
			Image{URL: "https://example.com/a.png"},
			Image{Data: []byte{0x89, 'P', 'N', 'G'}, MediaType: "image/png"},
		}},
	}
}

func TestMessageJSONRoundTrip(t *testing.T) {
	for i, m := range sampleMessages() {
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		var back Message
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("message %d: %v\n%s", i, err, data)
		}
		if !reflect.DeepEqual(back, m) {
			t.Fatalf("message %d round trip:\n got %+v\nwant %+v", i, back, m)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(data) {
			t.Fatalf("message %d encoding not stable:\n%s\n%s", i, data, again)
		}
	}
}

func TestMessageJSONShape(t *testing.T) {
	m := Message{Role: RoleAssistant, Parts: []Part{
		Text{Text: "hi"},
		ToolCall{ID: "c", Name: "t"},
	}}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"assistant","parts":[{"type":"text","text":"hi"},{"type":"tool_call","id":"c","name":"t"}]}`
	if string(data) != want {
		t.Fatalf("got  %s\nwant %s", data, want)
	}
}

// A result without images encodes as before images existed; one with
// images carries them untagged, data in standard base64.
func TestToolResultJSONShape(t *testing.T) {
	cases := []struct {
		part Part
		want string
	}{
		{ToolResult{CallID: "c", Content: "ok"}, `{"type":"tool_result","call_id":"c","content":"ok"}`},
		{ToolResult{CallID: "c", Content: "ok", Images: []Image{}}, `{"type":"tool_result","call_id":"c","content":"ok"}`},
		{ToolResult{CallID: "c", Content: "shot", Images: []Image{{Data: []byte("\x89PNG"), MediaType: "image/png"}, {URL: "https://x/y.png"}}},
			`{"type":"tool_result","call_id":"c","content":"shot","images":[{"data":"iVBORw==","media_type":"image/png"},{"url":"https://x/y.png"}]}`},
	}
	for _, c := range cases {
		data, err := MarshalPart(c.part)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != c.want {
			t.Errorf("got  %s\nwant %s", data, c.want)
		}
	}
}

func TestMessageJSONRefusesUnknown(t *testing.T) {
	cases := map[string]string{
		"unknown part type":               `{"role":"user","parts":[{"type":"video","url":"x"}]}`,
		"unknown part field":              `{"role":"user","parts":[{"type":"text","text":"a","bold":true}]}`,
		"unknown role":                    `{"role":"system","parts":[]}`,
		"parts without role":              `{"role":"","parts":[{"type":"text","text":"a"}]}`,
		"untyped part":                    `{"role":"user","parts":[{"text":"a"}]}`,
		"unknown field":                   `{"role":"user","parts":[],"name":"x"}`,
		"not an object":                   `[1]`,
		"unknown image field in a result": `{"role":"user","parts":[{"type":"tool_result","call_id":"c","content":"","images":[{"url":"u","alt":"a"}]}]}`,
		"tagged image in a result":        `{"role":"user","parts":[{"type":"tool_result","call_id":"c","content":"","images":[{"type":"image","url":"u"}]}]}`,
		"images not an array":             `{"role":"user","parts":[{"type":"tool_result","call_id":"c","content":"","images":{"url":"u"}}]}`,
		"image data not base64":           `{"role":"user","parts":[{"type":"tool_result","call_id":"c","content":"","images":[{"data":"!!","media_type":"image/png"}]}]}`,
	}
	for name, doc := range cases {
		var m Message
		if err := json.Unmarshal([]byte(doc), &m); err == nil {
			t.Errorf("%s: accepted %s", name, doc)
		}
	}
}

func TestRequestResponseJSONRoundTrip(t *testing.T) {
	temp := 0.2
	req := Request{
		Model:    "m",
		System:   "be brief",
		Messages: sampleMessages(),
		Tools: []ToolSpec{
			{Name: "read_file", Description: "reads", Schema: json.RawMessage(`{"type":"object"}`), Effect: EffectReadOnly},
			{Name: "bash", NeedsApproval: true},
		},
		ToolChoice:  ChooseTools("bash"),
		MaxTokens:   100,
		Temperature: &temp,
		Stop:        []string{"END"},
		Schema:      &OutputShape{Name: "answer", Schema: json.RawMessage(`{"type":"object"}`)},
	}
	roundTrip(t, req)
	resp := Response{
		Message:      sampleMessages()[1],
		Usage:        Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5},
		FinishReason: FinishToolCalls,
		Truncated:    true,
		ID:           "id",
		Model:        "m",
		RequestID:    "r",
		Raw:          json.RawMessage(`{"x":1}`),
	}
	roundTrip(t, resp)
}

func roundTrip[T any](t *testing.T, v T) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var back T
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if !reflect.DeepEqual(back, v) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, v)
	}
	again, _ := json.Marshal(back)
	if string(again) != string(data) {
		t.Fatalf("encoding not stable:\n%s\n%s", data, again)
	}
}

func TestEventJSONRoundTrip(t *testing.T) {
	evs := []Event{
		ResponseStart{ID: "a", Model: "m", RequestID: "r"},
		TextDelta{Text: "t"},
		ThinkingDelta{Start: true, Text: "x", Signature: "s", Redacted: "r"},
		ToolCallStart{Index: 1, ID: "c", Name: "n", Arguments: "{"},
		ToolCallDelta{Index: 1, Name: "m", Arguments: "}"},
		ToolCallEnd{Index: 1},
		UsageReport{Usage: Usage{InputTokens: 3}},
		UsageReport{Usage: Usage{InputTokens: 3}, Reported: UsageInput | UsageCacheRead},
		Finish{Reason: FinishStop},
	}
	for _, e := range evs {
		data, err := MarshalEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := UnmarshalEvent(data)
		if err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("round trip %s: got %#v", data, back)
		}
	}
	if _, err := UnmarshalEvent([]byte(`{"type":"future_thing"}`)); err == nil || !strings.Contains(err.Error(), "future_thing") {
		t.Fatalf("unknown event type: err = %v", err)
	}
	if _, err := UnmarshalEvent([]byte(`{"type":"text_delta","text":"a","extra":1}`)); err == nil {
		t.Fatal("unknown event field accepted")
	}
	if _, err := MarshalEvent(nil); err == nil {
		t.Fatal("nil event encoded")
	}
}

func TestToolChoiceAllowed(t *testing.T) {
	tools := []ToolSpec{{Name: "a"}, {Name: "b"}}
	cases := []struct {
		choice  ToolChoice
		tools   []ToolSpec
		want    []string
		wantErr string
	}{
		{ToolChoice{}, tools, []string{"a", "b"}, ""},
		{ToolChoice{Mode: ToolRequired}, tools, []string{"a", "b"}, ""},
		{ToolChoice{Mode: ToolRequired}, nil, nil, "needs at least one advertised tool"},
		{ToolChoice{Mode: ToolNone}, tools, nil, ""},
		{ChooseTools("b"), tools, []string{"b"}, ""},
		{ChooseTools("c"), tools, nil, `"c", which is not an advertised tool`},
		{ChooseTools(), tools, nil, "names no tool"},
		{ToolChoice{Mode: "sometimes"}, tools, nil, "unknown tool choice"},
	}
	for _, c := range cases {
		got, err := c.choice.Allowed(c.tools)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%+v: err = %v, want %q", c.choice, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", c.choice, err)
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("%+v: allowed %v, want %v", c.choice, got, c.want)
		}
		for _, n := range c.want {
			if !got[n] {
				t.Errorf("%+v: %q not allowed", c.choice, n)
			}
		}
	}
}

func TestMessageHelpers(t *testing.T) {
	m := sampleMessages()[1]
	if m.Text() != "Reading." || len(m.ToolCalls()) != 2 || len(m.ToolResults()) != 0 {
		t.Fatalf("text %q calls %d", m.Text(), len(m.ToolCalls()))
	}
	if !(Message{Role: RoleAssistant}).IsEmpty() || !AssistantText("").IsEmpty() || AssistantText(" ").IsEmpty() {
		t.Fatal("IsEmpty wrong")
	}
	c := m.Clone()
	c.Parts[0] = Text{Text: "changed"}
	if _, ok := m.Parts[0].(Thinking); !ok {
		t.Fatal("Clone shares parts")
	}
	if got := string((ToolCall{}).Args()); got != "{}" {
		t.Fatalf("empty Args = %s", got)
	}
	if EffectDestructive.SafeToRepeat() || !EffectReadOnly.SafeToRepeat() || !EffectIdempotent.SafeToRepeat() {
		t.Fatal("SafeToRepeat wrong")
	}
	if EffectDestructive.String() != "destructive" {
		t.Fatal("zero effect name")
	}
	u := Usage{InputTokens: 1, OutputTokens: 2}.Add(Usage{InputTokens: 3, ReasoningTokens: 1})
	if u != (Usage{InputTokens: 4, OutputTokens: 2, ReasoningTokens: 1}) || u.Total() != 6 {
		t.Fatalf("usage add = %+v", u)
	}
}

func TestZeroMessageRoundTrips(t *testing.T) {
	roundTrip(t, Message{})
	roundTrip(t, Message{Role: RoleUser})
	roundTrip(t, Response{})
}
