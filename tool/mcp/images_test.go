package mcp

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomkit/loom/internal/testimage"
	"github.com/loomkit/loom/llm"
)

func TestResultImages(t *testing.T) {
	png := testimage.Make("png", 1, 1)
	jpeg := testimage.Make("jpeg", 1, 1)
	gif := testimage.Make("gif", 1, 1)
	webp := testimage.Make("webp", 1, 1)
	wide := testimage.Make("png", 8001, 1)
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`)
	big := append(bytes.Clone(png), make([]byte, MaxImageBytes)...)
	atLimit := append(bytes.Clone(png), make([]byte, MaxImageBytes-len(png))...)
	cases := []struct {
		name  string
		block *sdk.ImageContent
		line  string
		image *llm.Image // nil: left out
	}{
		{"png", &sdk.ImageContent{MIMEType: "image/png", Data: png}, fmt.Sprintf("[image 1: image/png, %d bytes]", len(png)), &llm.Image{Data: png, MediaType: "image/png"}},
		{"jpeg", &sdk.ImageContent{MIMEType: "image/jpeg", Data: jpeg}, fmt.Sprintf("[image 1: image/jpeg, %d bytes]", len(jpeg)), &llm.Image{Data: jpeg, MediaType: "image/jpeg"}},
		{"gif", &sdk.ImageContent{MIMEType: "image/gif", Data: gif}, fmt.Sprintf("[image 1: image/gif, %d bytes]", len(gif)), &llm.Image{Data: gif, MediaType: "image/gif"}},
		{"webp", &sdk.ImageContent{MIMEType: "image/webp", Data: webp}, fmt.Sprintf("[image 1: image/webp, %d bytes]", len(webp)), &llm.Image{Data: webp, MediaType: "image/webp"}},
		{"mislabeled", &sdk.ImageContent{MIMEType: "image/jpg", Data: jpeg}, fmt.Sprintf("[image 1: image/jpg, %d bytes, sent as image/jpeg]", len(jpeg)), &llm.Image{Data: jpeg, MediaType: "image/jpeg"}},
		{"parameters in the type", &sdk.ImageContent{MIMEType: "Image/PNG; q=1", Data: png}, fmt.Sprintf("[image 1: Image/PNG; q=1, %d bytes]", len(png)), &llm.Image{Data: png, MediaType: "image/png"}},
		{"at the limit", &sdk.ImageContent{MIMEType: "image/png", Data: atLimit}, fmt.Sprintf("[image 1: image/png, %d bytes]", MaxImageBytes), &llm.Image{Data: atLimit, MediaType: "image/png"}},
		{"too large", &sdk.ImageContent{MIMEType: "image/png", Data: big},
			fmt.Sprintf("[image 1: image/png, %d bytes; left out: larger than the %d bytes an image may have]", len(big), MaxImageBytes), nil},
		{"svg", &sdk.ImageContent{MIMEType: "image/svg+xml", Data: svg}, "[image 1: image/svg+xml, 46 bytes; left out: the models take PNG, JPEG, GIF and WebP only]", nil},
		{"not an image type", &sdk.ImageContent{MIMEType: "application/pdf", Data: png}, fmt.Sprintf("[image 1: application/pdf, %d bytes; left out: not an image type]", len(png)), nil},
		{"no type", &sdk.ImageContent{Data: png}, fmt.Sprintf("[image 1: unknown type, %d bytes; left out: not an image type]", len(png)), nil},
		{"bytes not of the type", &sdk.ImageContent{MIMEType: "image/png", Data: []byte("hello")}, "[image 1: image/png, 5 bytes; left out: its bytes are not image/png]", nil},
		{"side over the limit", &sdk.ImageContent{MIMEType: "image/png", Data: wide},
			fmt.Sprintf("[image 1: image/png, %d bytes; left out: 8001×1 pixels; a side may have at most 8000]", len(wide)), nil},
		{"cut header", &sdk.ImageContent{MIMEType: "image/png", Data: png[:12]}, "[image 1: image/png, 12 bytes; left out: its image/png header does not decode: unexpected EOF]", nil},
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
	png := testimage.Make("png", 1, 1)
	gif := testimage.Make("gif", 1, 1)
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
	if !strings.HasPrefix(res.Content, fmt.Sprintf("[image 1: image/gif, %d bytes]\n", len(gif))) || !strings.HasSuffix(res.Content, fmt.Sprintf("[image 3: image/png, %d bytes]", len(png))) || len(res.Content) > 300 {
		t.Errorf("text %q", res.Content)
	}
}
