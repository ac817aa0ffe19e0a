// Package testimage makes small, well-formed images for tests: the bytes
// of a PNG, JPEG, GIF or WebP of a given size.
package testimage

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
)

// webp1x1 is a complete lossless WebP of one pixel.
const webp1x1 = "UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA=="

// Make returns an image of w×h pixels in format ("png", "jpeg", "gif" or
// "webp"). A WebP other than 1×1 is only a header (RIFF, VP8L signature
// and size), enough for image.DecodeConfig but not for image.Decode;
// sides up to 16384.
func Make(format string, w, h int) []byte {
	if format == "webp" {
		if w == 1 && h == 1 {
			b, _ := base64.StdEncoding.DecodeString(webp1x1)
			return b
		}
		return webpHeader(w, h)
	}
	m := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White})
	var b bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&b, m)
	case "jpeg":
		err = jpeg.Encode(&b, m, nil)
	case "gif":
		err = gif.Encode(&b, m, nil)
	default:
		panic("testimage: unknown format " + format)
	}
	if err != nil {
		panic(fmt.Sprintf("testimage: %s %d×%d: %v", format, w, h, err))
	}
	return b.Bytes()
}

func webpHeader(w, h int) []byte {
	bits := uint32(w-1) | uint32(h-1)<<14
	chunk := []byte{0x2f, 0, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(chunk[1:5], bits)
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(4+8+len(chunk)))
	b.WriteString("WEBPVP8L")
	binary.Write(&b, binary.LittleEndian, uint32(len(chunk)))
	b.Write(chunk)
	return b.Bytes()
}
