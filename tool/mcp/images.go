package mcp

import (
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

// MaxImageBytes is the largest image, in bytes, that a result of an MCP
// tool carries to the model (see [tool.MaxImageBytes]). A larger image is
// left out, and the result's text says so.
const MaxImageBytes = tool.MaxImageBytes

// toImage maps the n-th image block (from 1) of a result to an image for
// the model and the line that stands for it in the result's text. ok is
// false when the image is left out; the line then says why. An image is
// sent only when [tool.CheckImage] accepts it (an image type; PNG, JPEG,
// GIF or WebP bytes; at most MaxImageBytes; sides of at most
// [tool.MaxImageSide] pixels): the providers refuse others, and a refused
// image would fail every later request of the run, since it stays in the
// history. The media type sent is that of the bytes, which a server can
// label wrongly (image/jpg).
func toImage(n int, c *sdk.ImageContent) (img llm.Image, line string, ok bool) {
	head := fmt.Sprintf("[image %d: %s, %d bytes", n, orUnknown(c.MIMEType), len(c.Data))
	mediaType, err := tool.CheckImage(llm.Image{Data: c.Data, MediaType: c.MIMEType})
	if err != nil {
		return llm.Image{}, head + "; left out: " + err.(*tool.ImageError).Reason + "]", false
	}
	if declared, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(c.MIMEType)), ";"); mediaType != declared {
		head += ", sent as " + mediaType
	}
	return llm.Image{Data: c.Data, MediaType: mediaType}, head + "]", true
}
