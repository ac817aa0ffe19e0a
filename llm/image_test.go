package llm

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckImages(t *testing.T) {
	call := func(id string) Message {
		return Message{Role: RoleAssistant, Parts: []Part{ToolCall{ID: id, Name: "shot"}}}
	}
	png := Image{Data: []byte{1}, MediaType: "image/png"}
	cases := []struct {
		name string
		msgs []Message
		want *ImageError // nil: no error
		text string      // in the message
	}{
		{"no images", []Message{UserText("hi")}, nil, ""},
		{"good images", []Message{
			{Role: RoleUser, Parts: []Part{png, Image{URL: "https://x/y.png"}}},
			call("c1"),
			{Role: RoleUser, Parts: []Part{ToolResult{CallID: "c1", Images: []Image{png, {URL: "https://x"}}}}},
		}, nil, ""},
		{"part without data or URL", []Message{{Role: RoleUser, Parts: []Part{Text{Text: "a"}, Image{}}}},
			&ImageError{Message: 0, Part: 1, Reason: "it has neither data nor a URL"}, "message 0, part 1: it has neither"},
		{"part with data but no media type", []Message{{Role: RoleUser, Parts: []Part{Image{Data: []byte{1}, URL: "https://x"}}}},
			&ImageError{Message: 0, Part: 0, Reason: "it has data but no media type"}, "no media type"},
		{"result image with data but no media type", []Message{
			UserText("go"), call("c1"),
			{Role: RoleUser, Parts: []Part{ToolResult{CallID: "c1", Content: "x", Images: []Image{png, {Data: []byte{1}}}}}},
		}, &ImageError{Message: 2, Part: 0, CallID: "c1", Image: 1, InResult: true, Reason: "it has data but no media type"},
			`message 2, part 0 (the result for "c1"), image 1: it has data but no media type`},
		{"empty result image", []Message{
			call("c1"),
			{Role: RoleUser, Parts: []Part{ToolResult{CallID: "c1", Images: []Image{{MediaType: "image/png"}}}}},
		}, &ImageError{Message: 1, Part: 0, CallID: "c1", Image: 0, InResult: true, Reason: "it has neither data nor a URL"}, "neither data nor a URL"},
	}
	for _, c := range cases {
		err := CheckImages(c.msgs)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var ie *ImageError
		if !errors.As(err, &ie) || !errors.Is(err, ErrImage) {
			t.Errorf("%s: err = %v, want an *ImageError matching ErrImage", c.name, err)
			continue
		}
		if *ie != *c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, *ie, *c.want)
		}
		if !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %q does not say %q", c.name, err, c.text)
		}
	}
}
