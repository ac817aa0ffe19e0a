package sse

import (
	"bytes"
	"testing"
)

// lineEnd must find what bytes.IndexAny(b, "\r\n") finds.
func FuzzLineEnd(f *testing.F) {
	for _, s := range []string{"", "abc", "a\nb", "a\rb", "a\r\nb", "\n\r", "\r\n", "abc\rdef\n", "abc\ndef\r", "x\r\r\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := lineEnd(b), bytes.IndexAny(b, "\r\n"); got != want {
			t.Fatalf("lineEnd(%q) = %d, want %d", b, got, want)
		}
	})
}
