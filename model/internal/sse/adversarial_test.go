package sse

import (
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// manyLines yields one event made of "data:" lines of 64 KiB each, without
// end, counting what it gave.
type manyLines struct {
	n    int64
	line string
}

func (m *manyLines) Read(p []byte) (int, error) {
	if m.line == "" {
		m.line = "data: " + strings.Repeat("x", 64<<10-7) + "\n"
	}
	i := int(m.n % int64(len(m.line)))
	n := copy(p, m.line[i:])
	m.n += int64(n)
	return n, nil
}

// ADVERSARIAL 23, the event form: no line is long, but together the data
// lines of one event pass the bound. The decoder stops at the bound, and
// collecting the event allocates less than twice the bound in total, as
// for one long line.
func TestDecoderHugeEventBoundedMemory(t *testing.T) {
	src := &manyLines{}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d := NewDecoder(io.LimitReader(src, 40<<20))
	_, err := d.Next()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("got %v, want ErrEventTooLarge", err)
	}
	if src.n >= 40<<20 {
		t.Fatalf("decoder read the whole 40 MiB event (%d bytes) before failing", src.n)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2*DefaultMaxLine+(1<<20) {
		t.Fatalf("allocated %d MiB for an event bounded at %d MiB", alloc>>20, DefaultMaxLine>>20)
	}
	// The decoder stays failed.
	if _, err := d.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("next call: %v, want the same error again", err)
	}
}

// After an event over the bound, every call fails: neither the part of the
// event read so far nor the events after it come out.
func TestDecoderEventTooLargeIsSticky(t *testing.T) {
	y := strings.Repeat("y", 60)
	in := "data: " + y + "\ndata: " + y + "\n\ndata: after\n\n"
	d := NewDecoderSize(strings.NewReader(in), 100)
	for i := range 3 {
		ev, err := d.Next()
		if !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("call %d: event %q, error %v; want ErrEventTooLarge", i+1, ev.Data, err)
		}
	}
}
