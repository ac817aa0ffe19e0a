package imageinfo_test

import (
	"testing"

	"github.com/loomkit/loom/internal/imageinfo"
	"github.com/loomkit/loom/internal/testimage"
)

func TestSize(t *testing.T) {
	for _, c := range []struct {
		format string
		w, h   int
	}{{"png", 3, 2}, {"jpeg", 17, 9}, {"gif", 1, 40}, {"webp", 1, 1}, {"webp", 9000, 12}} {
		w, h, format, err := imageinfo.Size(testimage.Make(c.format, c.w, c.h))
		if err != nil || w != c.w || h != c.h || format != c.format {
			t.Errorf("%s %d×%d: %d×%d %q, %v", c.format, c.w, c.h, w, h, format, err)
		}
	}
	for _, bad := range [][]byte{nil, []byte("\x89PNG\r\n\x1a\n"), []byte("BM\x00\x00"), testimage.Make("png", 4, 4)[:20]} {
		if _, _, _, err := imageinfo.Size(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
