package shell

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// headTail keeps the first and the last bytes written to it, and counts
// the rest: memory stays bounded whatever a command prints. It is safe for
// concurrent use.
type headTail struct {
	mu    sync.Mutex
	head  []byte
	tail  []byte // a ring once full
	next  int    // where the ring is written next
	full  bool
	total int64
	h, t  int
}

func newHeadTail(keep int) *headTail {
	h := keep / 2
	return &headTail{h: h, t: keep - h, head: make([]byte, 0, min(h, 4096))}
}

func (b *headTail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if room := b.h - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if b.t == 0 || len(p) == 0 {
		return n, nil
	}
	if len(p) >= b.t {
		// Only the last t bytes of p survive.
		if cap(b.tail) < b.t {
			b.tail = make([]byte, b.t)
		}
		b.tail = b.tail[:b.t]
		copy(b.tail, p[len(p)-b.t:])
		b.next, b.full = 0, true
		return n, nil
	}
	if !b.full {
		if len(b.tail)+len(p) <= b.t {
			b.tail = append(b.tail, p...)
			if len(b.tail) == b.t {
				b.full, b.next = true, 0
			}
			return n, nil
		}
		// Grow to the ring's full size, then wrap.
		old := len(b.tail)
		b.tail = append(b.tail, make([]byte, b.t-old)...)
		b.next = old
		b.full = true
	}
	k := copy(b.tail[b.next:], p)
	copy(b.tail, p[k:])
	b.next = (b.next + len(p)) % b.t
	return n, nil
}

// Total returns how many bytes were written.
func (b *headTail) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// String returns what was kept, with a line saying how much was cut in
// the middle, as valid UTF-8.
func (b *headTail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var tail []byte
	if b.full {
		tail = append(append(tail, b.tail[b.next:]...), b.tail[:b.next]...)
	} else {
		tail = b.tail
	}
	kept := int64(len(b.head) + len(tail))
	var s strings.Builder
	s.Write(b.head)
	if cut := b.total - kept; cut > 0 {
		// Do not show a character split by the cut.
		head := trimPartialEnd(s.String())
		s.Reset()
		s.WriteString(head)
		tail = trimPartialStart(tail)
		fmt.Fprintf(&s, "\n\n[... %d bytes of output cut; %d of %d shown ...]\n\n", b.total-int64(len(head)+len(tail)), len(head)+len(tail), b.total)
	}
	s.Write(tail)
	return strings.ToValidUTF8(s.String(), "\uFFFD")
}

func trimPartialEnd(s string) string {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i]
			}
			break
		}
	}
	return s
}

func trimPartialStart(b []byte) []byte {
	for i := 0; i < len(b) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}
