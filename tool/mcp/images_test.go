package mcp

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomkit/loom/llm"
)

func TestResultImages(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	jpeg := []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00")
	gif := []byte("GIF89a\x01\x00\x01\x00")
	webp := []byte("RIFF\x1a\x00\x00\x00WEBPVP8 ")
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`)
	big := append(bytes.Clone(png), make([]byte, MaxImageBytes)...)
	atLimit := append(bytes.Clone(png), make([]byte, MaxImageBytes-len(png))...)
	cases := []struct {
		name  string
		block *sdk.ImageContent
		line  string
		image *llm.Image // nil: left out
	}{
		{"png", &sdk.ImageContent{MIMEType: "image/png", Data: png}, "[image 1: image/png, 16 bytes]", &llm.Image{Data: png, MediaType: "image/png"}},
		{"jpeg", &sdk.ImageContent{MIMEType: "image/jpeg", Data: jpeg}, "[image 1: image/jpeg, 11 bytes]", &llm.Image{Data: jpeg, MediaType: "image/jpeg"}},
		{"gif", &sdk.ImageContent{MIMEType: "image/gif", Data: gif}, "[image 1: image/gif, 10 bytes]", &llm.Image{Data: gif, MediaType: "image/gif"}},
		{"webp", &sdk.ImageContent{MIMEType: "image/webp", Data: webp}, "[image 1: image/webp, 16 bytes]", &llm.Image{Data: webp, MediaType: "image/webp"}},
		{"mislabeled", &sdk.ImageContent{MIMEType: "image/jpg", Data: jpeg}, "[image 1: image/jpg, 11 bytes, sent as image/jpeg]", &llm.Image{Data: jpeg, MediaType: "image/jpeg"}},
		{"parameters in the type", &sdk.ImageContent{MIMEType: "Image/PNG; q=1", Data: png}, "[image 1: Image/PNG; q=1, 16 bytes]", &llm.Image{Data: png, MediaType: "image/png"}},
		{"at the limit", &sdk.ImageContent{MIMEType: "image/png", Data: atLimit}, fmt.Sprintf("[image 1: image/png, %d bytes]", MaxImageBytes), &llm.Image{Data: atLimit, MediaType: "image/png"}},
		{"too large", &sdk.ImageContent{MIMEType: "image/png", Data: big},
			fmt.Sprintf("[image 1: image/png, %d bytes; left out: larger than the %d bytes an image may have]", len(big), MaxImageBytes), nil},
		{"svg", &sdk.ImageContent{MIMEType: "image/svg+xml", Data: svg}, "[image 1: image/svg+xml, 46 bytes; left out: the models take PNG, JPEG, GIF and WebP only]", nil},
		{"not an image type", &sdk.ImageContent{MIMEType: "application/pdf", Data: png}, "[image 1: application/pdf, 16 bytes; left out: not an image type]", nil},
		{"no type", &sdk.ImageContent{Data: png}, "[image 1: unknown type, 16 bytes; left out: not an image type]", nil},
		{"bytes not of the type", &sdk.ImageContent{MIMEType: "image/png", Data: []byte("hello")}, "[image 1: image/png, 5 bytes; left out: its bytes are not image/png]", nil},
		{"no data", &sdk.ImageContent{MIMEType: "image/png"}, "[image 1: image/png, 0 bytes; left out: no data]", nil},
	}
	for _, c := range cases {
		res := toResult(&sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "shot"}, c.block}}, 0)
		if want := "shot\n" + c.line; res.Content != want {
			t.Errorf("%s: text\n got %q\nwant %q", c.name, res.Content, want)
		}
		var want []llm.Image
		if c.image != nil {
			want = []llm.Image{*c.image}
		}
		if !reflect.DeepEqual(res.Images, want) {
			t.Errorf("%s: images %d, want %d", c.name, len(res.Images), len(want))
		}
		if err := llm.CheckImages([]llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{res}}}); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// Images are numbered in the order of the blocks, kept in that order, and
// survive the cut of a long text; audio stays a line.
func TestResultImagesOrderAndTruncation(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n")
	gif := []byte("GIF87a")
	res := toResult(&sdk.CallToolResult{IsError: true, Content: []sdk.Content{
		&sdk.ImageContent{MIMEType: "image/gif", Data: gif},
		&sdk.TextContent{Text: strings.Repeat("x", 1000)},
		&sdk.ImageContent{MIMEType: "image/bmp", Data: []byte("BM")},
		&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")},
		&sdk.ImageContent{MIMEType: "image/png", Data: png},
	}}, 200)
	want := []llm.Image{{Data: gif, MediaType: "image/gif"}, {Data: png, MediaType: "image/png"}}
	if !res.IsError || !reflect.DeepEqual(res.Images, want) {
		t.Fatalf("images %+v, want the GIF then the PNG", res.Images)
	}
	if !strings.HasPrefix(res.Content, "[image 1: image/gif, 6 bytes]\n") || !strings.HasSuffix(res.Content, "[image 3: image/png, 8 bytes]") || len(res.Content) > 300 {
		t.Errorf("text %q", res.Content)
	}
}
