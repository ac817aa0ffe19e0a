package llm

import (
	"errors"
	"fmt"
)

// ErrImage is matched (errors.Is) by every *ImageError.
var ErrImage = errors.New("llm: invalid image")

// ImageError says which image of a history no provider could take, and
// why: an image needs a URL, or its bytes and their media type.
type ImageError struct {
	Message  int    // the message holding the image
	Part     int    // the image part, or the tool result holding the image
	CallID   string // the call the result answers; empty for an image part
	Image    int    // the image's index in ToolResult.Images; 0 for an image part
	InResult bool   // the image is one of a tool result's Images
	Reason   string // what is wrong with it
}

func (e *ImageError) Error() string {
	where := fmt.Sprintf("message %d, part %d", e.Message, e.Part)
	if e.InResult {
		where += fmt.Sprintf(" (the result for %q), image %d", e.CallID, e.Image)
	}
	return fmt.Sprintf("llm: invalid image at %s: %s", where, e.Reason)
}

// Is makes errors.Is(err, ErrImage) match.
func (e *ImageError) Is(target error) bool { return target == ErrImage }

// Problem says why img cannot be sent, or returns "" when it can: it needs
// a URL, or data and a media type.
func (img Image) Problem() string {
	switch {
	case len(img.Data) > 0 && img.MediaType == "":
		return "it has data but no media type"
	case len(img.Data) == 0 && img.URL == "":
		return "it has neither data nor a URL"
	}
	return ""
}

// CheckImages returns an *ImageError for the first image in msgs that no
// provider could take, as an image part or among a tool result's Images;
// nil when there is none. It says nothing about formats or sizes, which
// each provider limits in its own way.
func CheckImages(msgs []Message) error {
	for i, m := range msgs {
		for j, p := range m.Parts {
			switch p := p.(type) {
			case Image:
				if why := p.Problem(); why != "" {
					return &ImageError{Message: i, Part: j, Reason: why}
				}
			case ToolResult:
				for k, img := range p.Images {
					if why := img.Problem(); why != "" {
						return &ImageError{Message: i, Part: j, CallID: p.CallID, Image: k, InResult: true, Reason: why}
					}
				}
			}
		}
	}
	return nil
}
