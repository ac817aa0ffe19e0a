package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/loomkit/loom/internal/testimage"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/anthropic"
	"github.com/loomkit/loom/model/modeltest"
)

// checkGolden compares body, indented, with testdata/name;
// UPDATE_GOLDEN=1 writes the file instead.
func checkGolden(t *testing.T, name string, body []byte) {
	t.Helper()
	var got bytes.Buffer
	if err := json.Indent(&got, body, "", "  "); err != nil {
		t.Fatalf("the body is not JSON: %v\n%s", err, body)
	}
	got.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("the body differs from %s:\n%s", path, got.Bytes())
	}
}

var (
	shotPNG = llm.Image{Data: []byte("\x89PNG\r\n\x1a\nshot"), MediaType: "image/png"}
	chart   = llm.Image{URL: "https://example.com/chart.png"}
	diffGIF = llm.Image{Data: []byte("GIF89a"), MediaType: "image/gif"}
)

// resultImagesRequest answers three calls with images: a result with text
// and an image, one with only an image by URL, a failed one with an image
// (and an id Anthropic refuses, so it is sanitized), then the user's text.
func resultImagesRequest() llm.Request {
	return llm.Request{
		Tools: []llm.ToolSpec{{Name: "screenshot"}, {Name: "chart"}, {Name: "diff"}},
		Messages: []llm.Message{
			llm.UserText("Show me the page, the chart and the diff."),
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				llm.ToolCall{ID: "toolu_1", Name: "screenshot"},
				llm.ToolCall{ID: "toolu_2", Name: "chart"},
				llm.ToolCall{ID: "call.3", Name: "diff"},
			}},
			{Role: llm.RoleUser, Parts: []llm.Part{
				llm.ToolResult{CallID: "toolu_1", Name: "screenshot", Content: "[image 1: image/png, 12 bytes]", Images: []llm.Image{shotPNG}},
				llm.ToolResult{CallID: "toolu_2", Name: "chart", Images: []llm.Image{chart}},
				llm.ToolResult{CallID: "call.3", Name: "diff", Content: "the diff is partial", IsError: true, Images: []llm.Image{diffGIF}},
				llm.Text{Text: "Compare them."},
			}},
		},
	}
}

// A result's images travel inside its tool_result, after its text; a
// failed result's images (Anthropic takes only text there) follow the
// results, named by the call. The recorded body pins the shape, and the
// local server, which refuses what the API refuses, reads the images back.
func TestToolResultImages(t *testing.T) {
	srv := start(t, loomtest.Text("ok"))
	m := newModel(srv, anthropic.Config{})
	req := resultImagesRequest()
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	blocking := srv.LastRequest()
	if _, _, err := modeltest.StreamCall(context.Background(), m, req); err != nil {
		t.Fatal(err)
	}
	stream := srv.LastRequest()
	for _, r := range []*loomtest.Request{blocking, stream} {
		if r.Err != nil {
			t.Fatalf("refused as the API would: %v", r.Err)
		}
	}
	checkGolden(t, "result_images.json", blocking.Body)

	content := body(t, srv)["messages"].([]any)[2].(map[string]any)["content"].([]any)
	raw, _ := json.Marshal(content[0])
	want := `{"content":[{"text":"[image 1: image/png, 12 bytes]","type":"text"},{"source":{"data":"iVBORw0KGgpzaG90","media_type":"image/png","type":"base64"},"type":"image"}],"tool_use_id":"toolu_1","type":"tool_result"}`
	if string(raw) != want {
		t.Errorf("result with text and image:\n%s\nwant\n%s", raw, want)
	}
	raw, _ = json.Marshal(content[1])
	want = `{"content":[{"source":{"type":"url","url":"https://example.com/chart.png"},"type":"image"}],"tool_use_id":"toolu_2","type":"tool_result"}`
	if string(raw) != want {
		t.Errorf("result with only an image:\n%s\nwant\n%s", raw, want)
	}
	id := anthropic.SanitizeID("call.3")
	raw, _ = json.Marshal(content[2:])
	want = `[{"content":"the diff is partial","is_error":true,"tool_use_id":"` + id + `","type":"tool_result"},` +
		`{"text":"Images from the result of call ` + id + ` (diff):","type":"text"},` +
		`{"source":{"data":"R0lGODlh","media_type":"image/gif","type":"base64"},"type":"image"},` +
		`{"text":"Compare them.","type":"text"}]`
	if string(raw) != want {
		t.Errorf("failed result and what follows:\n%s\nwant\n%s", raw, want)
	}

	got := stream.Decoded.Messages[2].ToolResults()
	if len(got) != 3 || !reflect.DeepEqual(got[0].Images, []llm.Image{shotPNG}) || !reflect.DeepEqual(got[1].Images, []llm.Image{chart}) || got[2].Images != nil {
		t.Errorf("the server read the results back as %+v", got)
	}
	if !bytes.Equal(blocking.Body, bytes.Replace(stream.Body, []byte(`,"stream":true`), nil, 1)) {
		t.Errorf("blocking and streaming bodies differ beyond the stream flag:\n%s\n%s", blocking.Body, stream.Body)
	}
}

// A result without images is sent as before: content a string.
func TestToolResultWithoutImagesIsAString(t *testing.T) {
	srv := start(t, loomtest.Text("ok"))
	m := newModel(srv, anthropic.Config{})
	req := resultImagesRequest()
	req.Messages[2].Parts[0] = llm.ToolResult{CallID: "toolu_1", Content: "no picture", Images: []llm.Image{}}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	content := body(t, srv)["messages"].([]any)[2].(map[string]any)["content"].([]any)
	if raw, _ := json.Marshal(content[0]); string(raw) != `{"content":"no picture","tool_use_id":"toolu_1","type":"tool_result"}` {
		t.Errorf("result without images: %s", raw)
	}
}

// An image in a result that no provider could take is refused before
// anything is sent, with the *llm.ImageError saying where it is.
func TestToolResultImageRefusedBeforeSending(t *testing.T) {
	srv := start(t, loomtest.Text("never"))
	m := newModel(srv, anthropic.Config{})
	for name, img := range map[string]llm.Image{
		"data without media type": {Data: []byte{1, 2}},
		"neither data nor URL":    {MediaType: "image/png"},
	} {
		req := resultImagesRequest()
		req.Messages[2].Parts[1] = llm.ToolResult{CallID: "toolu_2", Images: []llm.Image{chart, img}}
		both(t, m, req, func(mode string, _ llm.Response, err error) {
			var ie *llm.ImageError
			if model.KindOf(err) != model.KindBadRequest || !errors.As(err, &ie) || !errors.Is(err, llm.ErrImage) {
				t.Fatalf("%s/%s: err = %v, want a bad request wrapping *llm.ImageError", name, mode, err)
			}
			if ie.Message != 2 || ie.Part != 1 || ie.CallID != "toolu_2" || ie.Image != 1 || !ie.InResult {
				t.Errorf("%s/%s: located at %+v", name, mode, *ie)
			}
			if !strings.Contains(err.Error(), "not sent") {
				t.Errorf("%s/%s: %v does not say the request was not sent", name, mode, err)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d refused requests reached the server", n)
	}
}

// A history of screenshots outgrows the API's bounds on one request's
// images: with more than 20 images, none may have a side over 2000
// pixels. The oldest large ones are left out of the request, each with a
// line saying so, until 20 remain; the newest large one, and the caller's
// history, keep theirs.
func TestRequestKeepsWithinImageLimits(t *testing.T) {
	small := llm.Image{Data: testimage.Make("png", 8, 8), MediaType: "image/png"}
	large := llm.Image{Data: testimage.Make("webp", 2500, 1400), MediaType: "image/webp"}
	var msgs []llm.Message
	for i := range 23 {
		img := small
		if i%5 == 0 { // 0, 5, 10, 15, 20
			img = large
		}
		id := fmt.Sprintf("toolu_%d", i)
		msgs = append(msgs,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: id, Name: "shot", Arguments: `{}`}}},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: id, Name: "shot", Content: "page", Images: []llm.Image{img}}}})
	}
	msgs = slices.Insert(msgs, 0, llm.UserText("Browse."))
	srv := start(t, loomtest.Text("done"))
	m := newModel(srv, anthropic.Config{})
	if _, err := m.Generate(t.Context(), llm.Request{Tools: []llm.ToolSpec{{Name: "shot"}}, Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	var sentImages []string
	for _, msg := range body(t, srv)["messages"].([]any) {
		content, _ := msg.(map[string]any)["content"].([]any)
		for _, block := range content {
			b := block.(map[string]any)
			if b["type"] != "tool_result" {
				continue
			}
			inner, _ := b["content"].([]any)
			kind := "none"
			if s, ok := b["content"].(string); ok && strings.Contains(s, "left out of this request") {
				kind = "left out"
			}
			for _, c := range inner {
				c := c.(map[string]any)
				switch {
				case c["type"] == "image":
					kind = c["source"].(map[string]any)["media_type"].(string)
				case strings.Contains(fmt.Sprint(c["text"]), "left out of this request"):
					kind = "left out"
				}
			}
			sentImages = append(sentImages, kind)
		}
	}
	var want []string
	for i := range 23 {
		switch {
		case i%5 == 0 && i < 15:
			want = append(want, "left out")
		case i%5 == 0:
			want = append(want, "image/webp")
		default:
			want = append(want, "image/png")
		}
	}
	if !reflect.DeepEqual(sentImages, want) {
		t.Fatalf("the request's results carried\n%v\nwant\n%v", sentImages, want)
	}
	for _, msg := range msgs {
		for _, p := range msg.Parts {
			if r, ok := p.(llm.ToolResult); ok && len(r.Images) != 1 {
				t.Fatal("the caller's history lost an image")
			}
		}
	}
}

// Config.MaxImages keeps fewer images than the API would take: the
// newest.
func TestMaxImagesKeepsTheNewest(t *testing.T) {
	srv := start(t, loomtest.Text("ok"))
	m := newModel(srv, anthropic.Config{MaxImages: 1})
	req := resultImagesRequest()
	if _, err := m.Generate(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	sent := string(srv.LastRequest().Body)
	if n := strings.Count(sent, `"type":"image"`); n != 1 {
		t.Fatalf("%d images sent, want 1:\n%s", n, sent)
	}
	if strings.Count(sent, "left out of this request") < 1 {
		t.Fatalf("no line says an image was left out:\n%s", sent)
	}
	all := 0
	for _, msg := range req.Messages {
		for _, p := range msg.Parts {
			switch p := p.(type) {
			case llm.Image:
				all++
			case llm.ToolResult:
				all += len(p.Images)
			}
		}
	}
	if all < 2 {
		t.Fatalf("the request under test has %d images; it needs more than 1", all)
	}
}
