package tool_test

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/loomkit/loom/internal/testimage"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

func TestCheckImage(t *testing.T) {
	png := testimage.Make("png", 2, 3)
	jpeg := testimage.Make("jpeg", 4, 4)
	gif := testimage.Make("gif", 1, 1)
	webp := testimage.Make("webp", 1, 1)
	cases := []struct {
		name   string
		img    llm.Image
		want   string // media type; "" when refused
		reason string // part of the reason when refused
	}{
		{"png", llm.Image{Data: png, MediaType: "image/png"}, "image/png", ""},
		{"jpeg", llm.Image{Data: jpeg, MediaType: "image/jpeg"}, "image/jpeg", ""},
		{"gif", llm.Image{Data: gif, MediaType: "image/gif"}, "image/gif", ""},
		{"webp", llm.Image{Data: webp, MediaType: "image/webp"}, "image/webp", ""},
		{"mislabeled", llm.Image{Data: jpeg, MediaType: "image/jpg"}, "image/jpeg", ""},
		{"parameters in the type", llm.Image{Data: png, MediaType: " Image/PNG; q=1"}, "image/png", ""},
		{"side at the limit", llm.Image{Data: testimage.Make("webp", tool.MaxImageSide, 1), MediaType: "image/webp"}, "image/webp", ""},
		{"by URL", llm.Image{URL: "https://example.com/a.png", MediaType: "image/png"}, "image/png", ""},
		{"side over the limit", llm.Image{Data: testimage.Make("webp", 1, tool.MaxImageSide+1), MediaType: "image/webp"}, "", "1×8001 pixels; a side may have at most 8000"},
		{"wide png", llm.Image{Data: testimage.Make("png", 9000, 1), MediaType: "image/png"}, "", "9000×1 pixels"},
		{"too large", llm.Image{Data: append(bytes.Clone(png), make([]byte, tool.MaxImageBytes)...), MediaType: "image/png"}, "", "larger than the"},
		{"svg", llm.Image{Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`), MediaType: "image/svg+xml"}, "", "PNG, JPEG, GIF and WebP only"},
		{"not an image type", llm.Image{Data: png, MediaType: "application/pdf"}, "", "not an image type"},
		{"no type", llm.Image{Data: png}, "", "not an image type"},
		{"no data", llm.Image{MediaType: "image/png"}, "", "no data"},
		{"bytes not of the type", llm.Image{Data: []byte("hello"), MediaType: "image/png"}, "", "its bytes are not image/png"},
		{"only the signature", llm.Image{Data: []byte("\x89PNG\r\n\x1a\n"), MediaType: "image/png"}, "", "header does not decode"},
		{"cut header", llm.Image{Data: png[:20], MediaType: "image/png"}, "", "header does not decode"},
	}
	for _, c := range cases {
		got, err := tool.CheckImage(c.img)
		if c.want != "" {
			if err != nil || got != c.want {
				t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
			}
			continue
		}
		var ie *tool.ImageError
		if !errors.As(err, &ie) || !errors.Is(err, llm.ErrImage) || !strings.Contains(ie.Reason, c.reason) {
			t.Errorf("%s: %q, %v; want an *ImageError saying %q", c.name, got, err, c.reason)
			continue
		}
		if ie.Size != len(c.img.Data) || ie.MediaType != c.img.MediaType {
			t.Errorf("%s: error names %q, %d bytes", c.name, ie.MediaType, ie.Size)
		}
	}
}

// A result keeps the images the providers take, in order, relabelled by
// their bytes; each refused one becomes a line after the text; the
// caller's result is not changed.
func TestDropRefusedImages(t *testing.T) {
	png := testimage.Make("png", 1, 1)
	gif := testimage.Make("gif", 1, 1)
	huge := testimage.Make("png", 1, 8001)
	in := llm.ToolResult{CallID: "c1", Name: "shot", Content: "two shots", Images: []llm.Image{
		{Data: png, MediaType: "image/x-png"},
		{Data: huge, MediaType: "image/png"},
		{Data: gif, MediaType: "image/gif"},
		{Data: []byte("BM"), MediaType: "image/bmp"},
	}}
	orig := in
	orig.Images = append([]llm.Image(nil), in.Images...)
	got := tool.DropRefusedImages(in)
	want := []llm.Image{{Data: png, MediaType: "image/png"}, {Data: gif, MediaType: "image/gif"}}
	if !reflect.DeepEqual(got.Images, want) {
		t.Errorf("images %+v, want the PNG then the GIF", got.Images)
	}
	wantText := "two shots\n[image 2: image/png, " + strconv.Itoa(len(huge)) + " bytes; left out: 1×8001 pixels; a side may have at most 8000]\n" +
		"[image 4: image/bmp, 2 bytes; left out: the models take PNG, JPEG, GIF and WebP only]"
	if got.Content != wantText {
		t.Errorf("content\n got %q\nwant %q", got.Content, wantText)
	}
	if got.CallID != "c1" || got.Name != "shot" {
		t.Errorf("call id or name lost: %+v", got)
	}
	if !reflect.DeepEqual(in, orig) {
		t.Error("the caller's result was changed")
	}
	if err := llm.CheckImages([]llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{got}}}); err != nil {
		t.Error(err)
	}

	plain := llm.ToolResult{CallID: "c2", Content: "no pictures"}
	if got := tool.DropRefusedImages(plain); !reflect.DeepEqual(got, plain) {
		t.Errorf("a result without images changed: %+v", got)
	}
	only := tool.DropRefusedImages(llm.ToolResult{Images: []llm.Image{{MediaType: "image/png"}}})
	if only.Content != "[image 1: image/png, 0 bytes; left out: no data]" || len(only.Images) != 0 {
		t.Errorf("a result with only a refused image: %+v", only)
	}
}
