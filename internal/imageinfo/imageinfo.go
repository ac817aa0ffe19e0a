// Package imageinfo reads the size of an image from its header, for the
// formats the model providers take: PNG, JPEG, GIF and WebP.
package imageinfo

import (
	"bytes"
	"image"
	_ "image/gif"  // registers GIF for image.DecodeConfig
	_ "image/jpeg" // registers JPEG
	_ "image/png"  // registers PNG

	_ "golang.org/x/image/webp" // registers WebP
)

// Size returns the width and height in pixels of the image data holds,
// and its format ("png", "jpeg", "gif" or "webp"), reading only as far as
// the header; an error when the header does not decode.
func Size(data []byte) (width, height int, format string, err error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return 0, 0, "", err
	}
	return cfg.Width, cfg.Height, format, nil
}
