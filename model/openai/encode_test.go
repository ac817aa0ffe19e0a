package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
)

// referenceEncode is how the body was encoded before appendRequest: a
// json.Encoder without HTML escaping, its newline trimmed.
func referenceEncode(body *chatRequest) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// checkEncode: where appendRequest encodes a body, it writes exactly what
// encoding/json writes; where it gives up, encoding/json may refuse it.
func checkEncode(t *testing.T, body *chatRequest) (fast bool) {
	t.Helper()
	want, werr := referenceEncode(body)
	got, err := appendRequest(nil, body)
	if err != nil {
		if !errors.Is(err, errFallback) {
			t.Fatalf("appendRequest failed with %v, not errFallback", err)
		}
		return false
	}
	if werr != nil {
		t.Fatalf("appendRequest encoded a body encoding/json refuses (%v):\n%s", werr, got)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("bodies differ:\nfast %s\njson %s", got, want)
	}
	return true
}

// awkward holds strings every JSON encoder gets wrong somewhere.
var awkward = []string{
	"",
	"plain",
	`quote " backslash \ slash /`,
	"controls \x00\x01\x07\b\t\n\v\f\r\x1b\x1f and \x7f",
	"html <script>&amp;</script>",
	"unicode é 日本 😀",
	"separators \u2028 and \u2029",
	"invalid \xff\xfe \xc3 \xed\xa0\x80 \xf4\x90\x80\x80 end",
	"trailing \xe2\x80",
}

func TestEncodeMatchesJSON(t *testing.T) {
	m := New(Config{Model: "gpt-x"})
	reqs := []llm.Request{
		{Messages: []llm.Message{llm.UserText("hi")}},
		loopRequest(),
	}
	for _, s := range awkward {
		temp, topP := 0.2, 1e-7
		reqs = append(reqs, llm.Request{
			Model:  s,
			System: s,
			Messages: []llm.Message{
				llm.UserText(s),
				{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text{Text: s}, llm.Thinking{Text: s},
					llm.ToolCall{ID: "id" + s, Name: s, Arguments: s}, llm.ToolCall{ID: "b", Name: "n"}}},
				{Role: llm.RoleUser, Parts: []llm.Part{
					llm.ToolResult{CallID: "id" + s, Content: s, IsError: true},
					llm.ToolResult{CallID: "b", Name: s, Content: s, Images: []llm.Image{{Data: []byte(s + "y"), MediaType: "image/gif"}, {URL: "r" + s}}},
					llm.Text{Text: s}, llm.Image{URL: "u" + s}, llm.Image{Data: []byte(s + "x"), MediaType: "image/png"}}},
				{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text{Text: s}, llm.Text{Text: s}}},
				{Role: llm.RoleUser, Parts: []llm.Part{llm.Text{Text: s}, llm.Text{Text: s}}},
			},
			Tools: []llm.ToolSpec{
				{Name: "t", Description: s, Schema: json.RawMessage("{ \"type\" : \"object\",\n\t\"description\": \"" + strings.ReplaceAll(s, `\`, "") + "\" }")},
				{Name: "u"},
			},
			ToolChoice:  llm.ChooseTools("t"),
			Temperature: &temp,
			TopP:        &topP,
			MaxTokens:   4096,
			Stop:        []string{s, "END"},
			Schema:      &llm.OutputShape{Name: s, Schema: json.RawMessage(`{"type":"object"}`)},
		})
	}
	for i, req := range reqs {
		for _, stream := range []bool{false, true} {
			body, err := m.buildBody(opGenerate, req, stream)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			// Only a schema made invalid by the awkward string may send
			// a body to encoding/json.
			if !checkEncode(t, &body) && (len(req.Tools) == 0 || json.Valid(req.Tools[0].Schema)) {
				t.Errorf("request %d: the fast encoder gave up", i)
			}
		}
	}
}

func TestEncodeEdgeValues(t *testing.T) {
	nan, inf, big, tiny, negZero := math.NaN(), math.Inf(1), 1e21, 1e-7, math.Copysign(0, -1)
	bodies := []chatRequest{
		{},
		{Messages: []chatMessage{}},
		{Messages: []chatMessage{{Role: "user"}, {Role: "user", Content: []contentPart(nil)}, {Role: "user", Content: []contentPart{}}}},
		{Messages: []chatMessage{{Role: "user", Content: []contentPart{{Type: "text"}, {Type: "image_url", ImageURL: &imageURL{}}}}}},
		{Tools: []chatTool{{Type: "function", Function: functionSpec{Name: "n"}}}},
		{Tools: []chatTool{{Type: "function", Function: functionSpec{Name: "n", Parameters: json.RawMessage(" [1, 2 ,{ } ] ")}}}},
		{Tools: []chatTool{{Type: "function", Function: functionSpec{Name: "n", Parameters: json.RawMessage("{")}}}},
		{Tools: []chatTool{{Type: "function", Function: functionSpec{Name: "n", Parameters: json.RawMessage{}}}}},
		{ToolChoice: "none"},
		{ToolChoice: namedChoice{Type: "function"}},
		{ToolChoice: 3},
		{Temperature: &nan},
		{Temperature: &inf},
		{Temperature: &big, TopP: &tiny},
		{Temperature: &negZero},
		{MaxCompletionTokens: -1, MaxTokens: math.MaxInt},
		{Stop: []string{}},
		{ResponseFormat: &responseFormat{}},
		{ResponseFormat: &responseFormat{Type: "json_schema", JSONSchema: jsonSchema{Name: "x", Schema: json.RawMessage(`{"a" : [ ]}`)}}},
		{Stream: true, StreamOptions: &streamOptions{}},
		{Messages: []chatMessage{{Role: "user", Content: 42}}},
	}
	fast := 0
	for i := range bodies {
		if checkEncode(t, &bodies[i]) {
			fast++
		}
	}
	if fast < len(bodies)-6 {
		t.Fatalf("the fast encoder took only %d of %d bodies", fast, len(bodies))
	}
}

// FuzzEncodeMatchesJSON: for any strings, raw schema bytes and numbers,
// the fast encoder writes what encoding/json writes, or leaves the body
// to it.
func FuzzEncodeMatchesJSON(f *testing.F) {
	for _, s := range awkward {
		f.Add(s, s, []byte(`{"type":"object"}`), 0.5, 10)
	}
	f.Add("x", "y", []byte(" { } "), 1e300, -5)
	f.Add("x", "y", []byte("nul"), math.NaN(), 0)
	f.Fuzz(func(t *testing.T, a, b string, raw []byte, fl float64, n int) {
		body := chatRequest{
			Model: a,
			Messages: []chatMessage{
				{Role: "system", Content: a},
				{Role: "user", Content: []contentPart{{Type: "text", Text: b}, {Type: "image_url", ImageURL: &imageURL{URL: a}}}},
				{Role: "assistant", ToolCalls: []chatToolCall{{ID: a, Type: "function", Function: functionCall{Name: b, Arguments: a + b}}}},
				{Role: "tool", Content: b, ToolCallID: a},
			},
			Tools:               []chatTool{{Type: "function", Function: functionSpec{Name: a, Description: b, Parameters: raw}}},
			ToolChoice:          b,
			Temperature:         &fl,
			MaxCompletionTokens: n,
			Stop:                []string{a, b},
			ResponseFormat:      &responseFormat{Type: "json_schema", JSONSchema: jsonSchema{Name: b, Schema: raw}},
		}
		checkEncode(t, &body)
	})
}

// TestEncodeRequestFallsBack: a body the fast encoder leaves alone still
// gets encoding/json's result or error through encodeRequest.
func TestEncodeRequestFallsBack(t *testing.T) {
	m := New(Config{Model: "gpt-x"})
	nan := math.NaN()
	_, err := m.encodeRequest(opGenerate, llm.Request{Messages: []llm.Message{llm.UserText("hi")}, Temperature: &nan}, false)
	var ute *json.UnsupportedValueError
	if !errors.As(err, &ute) {
		t.Fatalf("NaN temperature: got %v, want encoding/json's UnsupportedValueError", err)
	}
	req := llm.Request{Messages: []llm.Message{llm.UserText("hi")},
		Tools: []llm.ToolSpec{{Name: "t", Schema: json.RawMessage(`{"a":`)}}}
	_, err = m.encodeRequest(opGenerate, req, false)
	var me *json.MarshalerError
	if !errors.As(err, &me) {
		t.Fatalf("broken schema: got %v, want encoding/json's MarshalerError", err)
	}
}
