package shell

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// naive keeps everything and cuts at the end: what headTail must equal.
func naive(all []byte, keep int) string {
	h := keep / 2
	t := keep - h
	if len(all) <= keep {
		return string(all)
	}
	head, tail := trimPartialEnd(string(all[:h])), trimPartialStart(all[len(all)-t:])
	return fmt.Sprintf("%s\n\n[... %d bytes of output cut; %d of %d shown ...]\n\n%s", head, len(all)-len(head)-len(tail), len(head)+len(tail), len(all), tail)
}

func checkHeadTail(t *testing.T, keep int, writes [][]byte) {
	t.Helper()
	b := newHeadTail(keep)
	var all []byte
	for _, w := range writes {
		n, err := b.Write(w)
		if n != len(w) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		all = append(all, w...)
	}
	want := strings.ToValidUTF8(naive(all, keep), "\uFFFD")
	if got := b.String(); got != want {
		t.Fatalf("keep %d, writes %q:\ngot  %q\nwant %q", keep, writes, got, want)
	}
	if b.Total() != int64(len(all)) {
		t.Fatalf("Total = %d, want %d", b.Total(), len(all))
	}
}

func TestHeadTail(t *testing.T) {
	checkHeadTail(t, 10, nil)
	checkHeadTail(t, 10, [][]byte{[]byte("short")})
	checkHeadTail(t, 10, [][]byte{[]byte("0123456789")})
	checkHeadTail(t, 10, [][]byte{[]byte("0123456789a")})
	checkHeadTail(t, 10, [][]byte{[]byte("01234"), []byte("567"), []byte("89abcdef"), []byte("g")})
	checkHeadTail(t, 10, [][]byte{bytes.Repeat([]byte("x"), 100), []byte("end")})
	checkHeadTail(t, 7, [][]byte{[]byte("héllo wörld, ünïcode"), []byte("日本語のテキスト")})
	checkHeadTail(t, 1, [][]byte{[]byte("abc")})
	s := newHeadTail(10)
	s.Write([]byte("日本語のテキスト"))
	if !utf8.ValidString(s.String()) {
		t.Errorf("String() = %q: not valid UTF-8", s.String())
	}
}

func FuzzHeadTail(f *testing.F) {
	f.Add(10, []byte("hello world, this is long"), 3)
	f.Add(3, []byte("日本語"), 1)
	f.Add(100, []byte("short"), 2)
	f.Fuzz(func(t *testing.T, keep int, data []byte, chunk int) {
		if keep <= 0 || keep > 1000 || chunk <= 0 {
			return
		}
		var writes [][]byte
		for len(data) > 0 {
			n := min(chunk, len(data))
			writes = append(writes, data[:n])
			data = data[n:]
		}
		checkHeadTail(t, keep, writes)
	})
}

func BenchmarkHeadTailWrite(b *testing.B) {
	buf := bytes.Repeat([]byte("y\n"), 16<<10)
	h := newHeadTail(DefaultMaxOutput)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		h.Write(buf)
	}
}
