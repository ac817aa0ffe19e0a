package mcp

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomkit/loom/llm"
)

// MaxImageBytes is the largest image, in bytes, that a result of an MCP
// tool carries to the model. Its base64 form (a third larger) is then at
// most 5 MiB, the most Anthropic takes for one image (measured on the
// base64 text); OpenAI takes more. A larger image is left out, and the
// result's text says so.
const MaxImageBytes = 5 << 20 / 4 * 3

// imageFormats are the formats both providers take.
var imageFormats = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// toImage maps the n-th image block (from 1) of a result to an image for
// the model and the line that stands for it in the result's text. ok is
// false when the image is left out; the line then says why. An image is
// sent only when its MIME type is an image type and its bytes are PNG,
// JPEG, GIF or WebP, of at most MaxImageBytes: the providers refuse other
// formats, and a refused image would fail every later request of the run,
// since it stays in the history. The media type sent is that of the
// bytes, which a server can label wrongly (image/jpg).
func toImage(n int, c *sdk.ImageContent) (img llm.Image, line string, ok bool) {
	declared := orUnknown(c.MIMEType)
	head := fmt.Sprintf("[image %d: %s, %d bytes", n, declared, len(c.Data))
	mediaType, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(c.MIMEType)), ";")
	sniffed := ""
	if len(c.Data) > 0 {
		sniffed = http.DetectContentType(c.Data)
	}
	var why string
	switch {
	case !strings.HasPrefix(mediaType, "image/"):
		why = "not an image type"
	case len(c.Data) == 0:
		why = "no data"
	case len(c.Data) > MaxImageBytes:
		why = fmt.Sprintf("larger than the %d bytes an image may have", MaxImageBytes)
	case !slices.Contains(imageFormats, sniffed):
		why = "the models take PNG, JPEG, GIF and WebP only"
		if slices.Contains(imageFormats, mediaType) {
			why = "its bytes are not " + mediaType
		}
	}
	if why != "" {
		return llm.Image{}, head + "; left out: " + why + "]", false
	}
	if sniffed != mediaType {
		head += ", sent as " + sniffed
	}
	return llm.Image{Data: c.Data, MediaType: sniffed}, head + "]", true
}
