package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/model/openai"
)

var (
	shotPNG = llm.Image{Data: []byte("\x89PNG\r\n\x1a\nshot"), MediaType: "image/png"}
	chart   = llm.Image{URL: "https://example.com/chart.png"}
	diffGIF = llm.Image{Data: []byte("GIF89a"), MediaType: "image/gif"}
)

// resultImagesRequest answers three calls, two of them with images (one
// failed), followed by the user's own text and image; then one more turn
// whose results carry no images.
func resultImagesRequest() llm.Request {
	return llm.Request{
		System: "You look at pictures.",
		Tools:  []llm.ToolSpec{{Name: "screenshot"}, {Name: "chart"}, {Name: "diff"}},
		Messages: []llm.Message{
			llm.UserText("Show me the page, the chart and the diff."),
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				llm.ToolCall{ID: "call_1", Name: "screenshot"},
				llm.ToolCall{ID: "call_2", Name: "chart"},
				llm.ToolCall{ID: "call_3", Name: "diff"},
			}},
			{Role: llm.RoleUser, Parts: []llm.Part{
				llm.ToolResult{CallID: "call_1", Name: "screenshot", Content: "[image 1: image/png, 12 bytes]", Images: []llm.Image{shotPNG, chart}},
				llm.ToolResult{CallID: "call_2", Name: "chart", Content: "no chart today"},
				llm.ToolResult{CallID: "call_3", Name: "diff", Content: "the diff is partial", IsError: true, Images: []llm.Image{diffGIF}},
				llm.Text{Text: "Compare them with mine."},
				llm.Image{URL: "https://example.com/mine.png"},
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "call_4", Name: "chart"}}},
			{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "call_4", Name: "chart", Content: "still none"}}},
		},
	}
}

// Tool messages take text only: the images of a user message's results go
// after its tool messages, in one user message, each result's after a text
// naming the call, followed by the message's own parts. The recorded body
// pins the shape.
func TestGoldenResultImages(t *testing.T) {
	m, f := start(t, openai.Config{APIKey: "sk-test-key"},
		jsonReply(200, `{"id":"c1","choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}`),
		sseReply(events(`{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`)))
	if _, err := m.Generate(bg, resultImagesRequest()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := collect(m.Stream(bg, resultImagesRequest())); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	checkGolden(t, "result_images_generate.json", reqs[0].Body)
	checkGolden(t, "result_images_stream.json", reqs[1].Body)

	var body struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, msg := range body.Messages {
		roles = append(roles, msg.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,tool,tool,user,assistant,tool" {
		t.Fatalf("roles %s", got)
	}
	if string(body.Messages[3].Content) != `"[image 1: image/png, 12 bytes]"` || string(body.Messages[5].Content) != `"Error: the diff is partial"` {
		t.Errorf("tool messages: %s, %s", body.Messages[3].Content, body.Messages[5].Content)
	}
	want := `[{"type":"text","text":"Images from the result of call call_1 (screenshot):"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgpzaG90"}},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/chart.png"}},` +
		`{"type":"text","text":"Images from the result of call call_3 (diff):"},` +
		`{"type":"image_url","image_url":{"url":"data:image/gif;base64,R0lGODlh"}},` +
		`{"type":"text","text":"Compare them with mine."},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/mine.png"}}]`
	if got := string(body.Messages[6].Content); got != want {
		t.Errorf("user message after the results:\n%s\nwant\n%s", got, want)
	}
	if string(body.Messages[8].Content) != `"still none"` {
		t.Errorf("a result without images: %s", body.Messages[8].Content)
	}
}

// Results with images and nothing else in their message still get the
// user message, and the local server, which refuses what the API refuses,
// takes the requests, blocking and streaming.
func TestResultImagesAccepted(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Repeat: true, Turns: []loomtest.Turn{loomtest.Text("ok")}})
	t.Cleanup(srv.Close)
	m := openai.New(openai.Config{APIKey: "sk-test", BaseURL: srv.OpenAIURL(), Model: "gpt-test"})
	only := resultImagesRequest()
	only.Messages[2].Parts = only.Messages[2].Parts[:3]
	for _, req := range []llm.Request{resultImagesRequest(), only} {
		if _, err := m.Generate(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if _, _, err := modeltest.StreamCall(context.Background(), m, req); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range srv.Requests() {
		if r.Err != nil {
			t.Fatalf("request %d refused as the API would: %v", i, r.Err)
		}
	}
	got := srv.LastRequest().Decoded.Messages
	want := llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
		llm.Text{Text: "Images from the result of call call_1 (screenshot):"},
		llm.Image{URL: "data:image/png;base64,iVBORw0KGgpzaG90"},
		llm.Image{URL: "https://example.com/chart.png"},
		llm.Text{Text: "Images from the result of call call_3 (diff):"},
		llm.Image{URL: "data:image/gif;base64,R0lGODlh"},
	}}
	if len(got) < 4 || !reflect.DeepEqual(got[3], want) {
		t.Fatalf("decoded %+v\nwant message 3 = %+v", got, want)
	}
}

// An image in a result that no provider could take is refused before
// anything is sent, with the *llm.ImageError saying where it is.
func TestResultImageRefusedBeforeSending(t *testing.T) {
	m, f := start(t, openai.Config{}, jsonReply(200, `{}`))
	for name, img := range map[string]llm.Image{
		"data without media type": {Data: []byte{1, 2}},
		"neither data nor URL":    {MediaType: "image/png"},
	} {
		req := resultImagesRequest()
		req.Messages[2].Parts[2] = llm.ToolResult{CallID: "call_3", Images: []llm.Image{diffGIF, img}}
		_, err := m.Generate(bg, req)
		var ie *llm.ImageError
		if model.KindOf(err) != model.KindBadRequest || !errors.As(err, &ie) || !errors.Is(err, llm.ErrImage) {
			t.Fatalf("%s: err = %v, want a bad request wrapping *llm.ImageError", name, err)
		}
		if ie.Message != 2 || ie.Part != 2 || ie.CallID != "call_3" || ie.Image != 1 || !ie.InResult {
			t.Errorf("%s: located at %+v", name, *ie)
		}
		if _, _, err := collect(m.Stream(bg, req)); !errors.Is(err, llm.ErrImage) {
			t.Errorf("%s: stream: %v", name, err)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d refused requests reached the server", n)
	}
}

// Config.MaxImages keeps the newest images of a request and leaves the
// older ones out, each with a line saying so; the caller's history keeps
// them all.
func TestMaxImagesKeepsTheNewest(t *testing.T) {
	m, f := start(t, openai.Config{APIKey: "sk-test-key", MaxImages: 2},
		jsonReply(200, `{"id":"c1","choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}`))
	req := resultImagesRequest()
	if _, err := m.Generate(bg, req); err != nil {
		t.Fatal(err)
	}
	body := string(f.requests()[0].Body)
	if n := strings.Count(body, `"type":"image_url"`); n != 2 {
		t.Fatalf("%d images sent, want 2:\n%s", n, body)
	}
	for _, want := range []string{`data:image/gif;base64,`, `https://example.com/mine.png`, `[image 1 of this result is left out of this request`, `[image 2 of this result is left out of this request`} {
		if !strings.Contains(body, want) {
			t.Errorf("the body lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "data:image/png") || strings.Contains(body, "chart.png") {
		t.Errorf("the oldest images were sent:\n%s", body)
	}
	if r := req.Messages[2].Parts[0].(llm.ToolResult); len(r.Images) != 2 {
		t.Fatal("the caller's history lost an image")
	}
}
