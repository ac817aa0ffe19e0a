package tool

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/loomkit/loom/internal/imageinfo"
	"github.com/loomkit/loom/llm"
)

// MaxImageBytes is the largest image, in bytes, that a tool result carries
// to the model. Its base64 form (a third larger) is then at most 5 MiB, the
// most Anthropic takes for one image (measured on the base64 text); OpenAI
// takes more.
const MaxImageBytes = 5 << 20 / 4 * 3

// MaxImageSide is the longest side, in pixels, of an image a tool result
// carries to the model: Anthropic refuses an image with a side over 8000
// pixels.
const MaxImageSide = 8000

// imageFormats are the formats both providers take.
var imageFormats = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// ImageError says why the providers would refuse an image.
type ImageError struct {
	MediaType string // as declared
	Size      int    // bytes
	Reason    string
}

func (e *ImageError) Error() string {
	return fmt.Sprintf("image (%s, %d bytes) refused: %s", orUnknown(e.MediaType), e.Size, e.Reason)
}

// Is makes errors.Is(err, llm.ErrImage) match.
func (e *ImageError) Is(target error) bool { return target == llm.ErrImage }

// CheckImage returns the media type to send img's bytes under, or an
// *ImageError when the providers would refuse it: declared as something
// other than an image, no bytes, more than [MaxImageBytes], bytes that are
// not PNG, JPEG, GIF or WebP (or not the declared one of them), bytes that
// do not decode as far as the image's size, or a side over [MaxImageSide]
// pixels. The media type returned is that of the bytes, which a tool can
// label wrongly (image/jpg). An image given by URL is not fetched: it is
// accepted with its declared type.
func CheckImage(img llm.Image) (mediaType string, err error) {
	if img.URL != "" && len(img.Data) == 0 {
		return img.MediaType, nil
	}
	fail := func(format string, a ...any) (string, error) {
		return "", &ImageError{MediaType: img.MediaType, Size: len(img.Data), Reason: fmt.Sprintf(format, a...)}
	}
	declared, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(img.MediaType)), ";")
	switch {
	case !strings.HasPrefix(declared, "image/"):
		return fail("not an image type")
	case len(img.Data) == 0:
		return fail("no data")
	case len(img.Data) > MaxImageBytes:
		return fail("larger than the %d bytes an image may have", MaxImageBytes)
	}
	sniffed := http.DetectContentType(img.Data)
	if !slices.Contains(imageFormats, sniffed) {
		if slices.Contains(imageFormats, declared) {
			return fail("its bytes are not %s", declared)
		}
		return fail("the models take PNG, JPEG, GIF and WebP only")
	}
	w, h, _, err := imageinfo.Size(img.Data)
	switch {
	case err != nil:
		return fail("its %s header does not decode: %v", sniffed, err)
	case w <= 0 || h <= 0:
		return fail("it is %d×%d pixels", w, h)
	case w > MaxImageSide || h > MaxImageSide:
		return fail("%d×%d pixels; a side may have at most %d", w, h, MaxImageSide)
	}
	return sniffed, nil
}

// DropRefusedImages returns res with every image the providers would refuse
// left out (see [CheckImage]), a line at the end of its content saying
// which and why, and the others labelled with the media type of their
// bytes. A refused image would otherwise fail the next model request and,
// since it stays in the history, every later one of the run. res is not
// modified; without images it is returned as it is.
func DropRefusedImages(res llm.ToolResult) llm.ToolResult {
	if len(res.Images) == 0 {
		return res
	}
	var kept []llm.Image
	var notes []string
	for i, img := range res.Images {
		mt, err := CheckImage(img)
		if err != nil {
			notes = append(notes, fmt.Sprintf("[image %d: %s, %d bytes; left out: %s]", i+1, orUnknown(img.MediaType), len(img.Data), err.(*ImageError).Reason))
			continue
		}
		img.MediaType = mt
		kept = append(kept, img)
	}
	res.Images = kept
	if len(notes) > 0 {
		if res.Content != "" {
			notes = slices.Insert(notes, 0, res.Content)
		}
		res.Content = strings.Join(notes, "\n")
	}
	return res
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}
