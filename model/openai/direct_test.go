package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/internal/wire"
)

// referenceBody is what encodeRequest sent before the direct encoder:
// buildBody, then encoding/json.
func referenceBody(m *Model, req llm.Request, stream bool) ([]byte, error) {
	body, err := m.buildBody(opGenerate, req, stream)
	if err != nil {
		return nil, err
	}
	out, err := referenceEncode(&body)
	if err != nil {
		return nil, badRequest(opGenerate, "the request cannot be encoded as JSON", err)
	}
	return out, nil
}

// checkDirect: encodeRequest gives the reference's bytes, or its error.
func checkDirect(t *testing.T, m *Model, req llm.Request, stream bool) {
	t.Helper()
	want, werr := referenceBody(m, req, stream)
	got, err := m.encodeRequest(opGenerate, req, stream)
	if werr != nil || err != nil {
		if werr == nil || err == nil || werr.Error() != err.Error() {
			t.Fatalf("errors differ:\ngot  %v\nwant %v", err, werr)
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("bodies differ:\ngot  %s\nwant %s", got, want)
	}
}

func directRequests() []llm.Request {
	temp, topP, nan := 0.7, 1e-9, math.NaN()
	schema := json.RawMessage(`{ "type": "object",
		"properties": {"path": {"type": "string"}} }`)
	tools := []llm.ToolSpec{{Name: "read", Description: "Reads.", Schema: schema}, {Name: "ls"}, {Name: "ws", Schema: json.RawMessage(" \n")}}
	reqs := []llm.Request{
		loopRequest(),
		{Messages: []llm.Message{llm.UserText("hi")}},
		{Model: "other", System: "sys", Messages: []llm.Message{llm.UserText("hi")}, Tools: tools,
			ToolChoice: llm.ToolChoice{Mode: llm.ToolRequired}, Temperature: &temp, TopP: &topP, MaxTokens: 77, Stop: []string{"a", "b"}},
		{Messages: []llm.Message{llm.UserText("hi")}, Tools: tools, ToolChoice: llm.ToolChoice{Mode: llm.ToolNone}},
		{Messages: []llm.Message{llm.UserText("hi")}, ToolChoice: llm.ToolChoice{Mode: llm.ToolNone}},
		{Messages: []llm.Message{llm.UserText("hi")}, Tools: tools, ToolChoice: llm.ChooseTools("read")},
		{Messages: []llm.Message{llm.UserText("hi")}, Tools: tools, ToolChoice: llm.ChooseTools("read", "ls")},
		{Messages: []llm.Message{llm.UserText("hi")}, Schema: &llm.OutputShape{Name: "out", Schema: schema}},
		{Messages: []llm.Message{llm.UserText("hi")}, Schema: &llm.OutputShape{Name: "out"}},
		{Messages: []llm.Message{llm.UserText("hi")}, Temperature: &nan},
		{Messages: []llm.Message{llm.UserText("hi")}, Tools: []llm.ToolSpec{{Name: "bad", Schema: json.RawMessage(`{"a":`)}}},
		{Messages: []llm.Message{
			llm.UserText("go"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Thinking{Text: "hm"}, llm.Text{Text: "a "}, llm.Text{Text: "b"},
				llm.ToolCall{ID: "1", Name: "read", Arguments: `{"path":"x"}`}, llm.ToolCall{ID: "2", Name: "ls", Arguments: "  "}}},
			{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "1", Content: "ok"}, llm.ToolResult{CallID: "2", Content: "denied", IsError: true}}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text{Text: "\xe2\x80"}, llm.Text{Text: "\xa8 joined"}}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Thinking{Text: "only thinking"}}},
			{Role: llm.RoleAssistant},
			llm.UserText(""),
		}, Tools: tools},
		// Not direct: the general path must still be what runs.
		{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Text{Text: "a"}, llm.Image{URL: "https://x/y.png"}}}}},
		{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Image{}}}}},
		{Messages: []llm.Message{{Role: llm.RoleUser}}},
		// Refused: the errors must be the general path's.
		{Messages: []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "x", Name: "read"}}}, llm.UserText("no result")}},
		{Messages: []llm.Message{llm.UserText("hi")}, Tools: tools, ToolChoice: llm.ChooseTools("missing")},
		// Results with images: not direct, and refused alike when an
		// image cannot be sent.
		{Messages: []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "x", Name: "read"}}},
			{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "x", Name: "read", Content: "ok", Images: []llm.Image{{Data: []byte("p"), MediaType: "image/png"}, {URL: "https://x/y.png"}}}}}}},
		{Messages: []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "x", Name: "read"}}},
			{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "x", Images: []llm.Image{{Data: []byte("p")}}}}}}},
	}
	for _, s := range awkward {
		reqs = append(reqs, llm.Request{Model: s + "m", System: s, Stop: []string{s},
			Messages: []llm.Message{llm.UserText(s),
				{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text{Text: s}, llm.ToolCall{ID: "id" + s, Name: s, Arguments: s}}},
				{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "id" + s, Content: s, IsError: true}}}},
			Tools:  []llm.ToolSpec{{Name: s + "t", Description: s, Schema: schema}},
			Schema: &llm.OutputShape{Name: s, Schema: schema}})
	}
	return reqs
}

func TestDirectMatchesBuildBody(t *testing.T) {
	models := []*Model{
		New(Config{Model: "gpt-x"}),
		New(Config{Model: "gpt-x", MaxTokens: 1000, LegacyMaxTokens: true}),
		New(Config{MaxTokens: -3}),
	}
	for i, req := range directRequests() {
		for _, m := range models {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprint(i), func(t *testing.T) { checkDirect(t, m, req, stream) })
			}
		}
	}
}

// TestDirectTakesCommonRequests: the loop's requests do not fall back.
func TestDirectTakesCommonRequests(t *testing.T) {
	m := New(Config{Model: "gpt-x"})
	for i, req := range directRequests()[:12] {
		if !direct(req) {
			t.Errorf("request %d: not direct", i)
			continue
		}
		if _, ok := m.appendDirect(nil, req, true, "gpt-x"); !ok && i != 9 && i != 10 {
			t.Errorf("request %d: the direct encoder gave up", i)
		}
	}
	for i, req := range directRequests()[12:15] {
		if direct(req) {
			t.Errorf("request %d: direct, but has images or an empty user message", 12+i)
		}
	}
	for i, req := range directRequests()[17:19] {
		if direct(req) {
			t.Errorf("request %d: direct, but a result has images", 17+i)
		}
	}
}

// FuzzDirectMatchesBuildBody builds valid histories from the input bytes
// (user texts, assistant texts and calls, results with and without
// errors, with images when mode&8 is set, one of them without a media
// type when mode&16 is set) and checks the direct encoder against the
// general path.
func FuzzDirectMatchesBuildBody(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5}, "hello", `{"a":1}`, uint8(0))
	f.Add([]byte{2, 2, 9, 17, 3}, "\u2028<&>\x00", "", uint8(3))
	f.Add([]byte{4, 4, 4}, "\xff", "  ", uint8(2))
	f.Add([]byte{0, 0x22, 0x13, 4}, "shot", "\u2028<&>", uint8(8|4))
	f.Add([]byte{0x22, 1}, "a", "b", uint8(8|16))
	f.Fuzz(func(t *testing.T, ops []byte, a, b string, mode uint8) {
		req := llm.Request{System: a, Tools: []llm.ToolSpec{{Name: "t", Description: b}, {Name: "u", Schema: json.RawMessage(`{"type":"object"}`)}}}
		switch mode % 4 {
		case 1:
			req.ToolChoice = llm.ToolChoice{Mode: llm.ToolRequired}
		case 2:
			req.ToolChoice = llm.ChooseTools("u")
		case 3:
			req.ToolChoice = llm.ToolChoice{Mode: llm.ToolNone}
		}
		for i, op := range ops {
			if i > 40 {
				break
			}
			switch op % 5 {
			case 0:
				req.Messages = append(req.Messages, llm.UserText(a))
			case 1:
				req.Messages = append(req.Messages, llm.UserText(b+a))
			case 2, 3, 4:
				var parts []llm.Part
				if op%5 != 4 {
					parts = append(parts, llm.Text{Text: b})
				}
				if op&8 != 0 {
					parts = append(parts, llm.Thinking{Text: a})
				}
				n := int(op>>4) % 3
				var results []llm.Part
				for j := range n {
					id := fmt.Sprintf("c%d_%d", i, j)
					parts = append(parts, llm.ToolCall{ID: id, Name: "t", Arguments: []string{a, b, ""}[j]})
					r := llm.ToolResult{CallID: id, Content: b, IsError: j == 1}
					if mode&8 != 0 && j != 2 {
						r.Name = a
						r.Images = []llm.Image{{Data: []byte(a + "x"), MediaType: "image/png"}, {URL: b + "u"}}
						if mode&16 != 0 && j == 1 {
							r.Images[0].MediaType = ""
						}
					}
					results = append(results, r)
				}
				req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: parts})
				if n > 0 {
					req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: results})
				}
			}
		}
		m := New(Config{Model: strings.TrimSpace(b)})
		checkDirect(t, m, req, mode&4 != 0)
	})
}

func TestSchemaCache(t *testing.T) {
	m := New(Config{Model: "gpt-x"})
	raw := []byte(`{ "type" : "object" }`)
	req := llm.Request{Messages: []llm.Message{llm.UserText("hi")}, Tools: []llm.ToolSpec{{Name: "t", Schema: raw}}}
	first, err := m.encodeRequest(opGenerate, req, false)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := m.encodeRequest(opGenerate, req, false)
	if !bytes.Equal(first, again) || !bytes.Contains(first, []byte(`"parameters":{"type":"object"}`)) {
		t.Fatalf("got %s then %s", first, again)
	}
	// The caller changes its schema in place: the new content is sent.
	copy(raw, `{ "type" : "string" }`)
	changed, _ := m.encodeRequest(opGenerate, req, false)
	if !bytes.Contains(changed, []byte(`"parameters":{"type":"string"}`)) {
		t.Fatalf("a schema changed in place was not sent as it is now: %s", changed)
	}
	// The cache stays bounded, and what is not cached is still right.
	for i := range wire.MemoEntries + 50 {
		req.Tools[0].Schema = json.RawMessage(fmt.Sprintf(`{"description": "%d"}`, i))
		body, err := m.encodeRequest(opGenerate, req, false)
		if err != nil || !bytes.Contains(body, []byte(fmt.Sprintf(`"parameters":{"description":"%d"}`, i))) {
			t.Fatalf("schema %d: %v %s", i, err, body)
		}
	}
	if n := m.schemas.Len(); n > wire.MemoEntries {
		t.Fatalf("the cache holds %d schemas, more than %d", n, wire.MemoEntries)
	}
}
