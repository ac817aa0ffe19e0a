package sse

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

func TestCloseEndsTheDecoder(t *testing.T) {
	d := NewDecoder(strings.NewReader("data: one\n\ndata: two\n\n"))
	ev, err := d.Next()
	if err != nil || string(ev.Data) != "one" {
		t.Fatalf("got %q, %v", ev.Data, err)
	}
	d.Close()
	d.Close() // twice is fine
	if _, err := d.Next(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	// The event returned before Close is intact even when the buffer is
	// reused at once.
	d2 := NewDecoder(strings.NewReader("data: " + strings.Repeat("x", 100) + "\n\n"))
	if _, err := d2.Next(); err != nil {
		t.Fatal(err)
	}
	if string(ev.Data) != "one" {
		t.Fatalf("data returned before Close changed to %q", ev.Data)
	}
}

// A closed decoder keeps a sticky error it already had.
func TestCloseKeepsAnEarlierError(t *testing.T) {
	d := NewDecoderSize(strings.NewReader("data: "+strings.Repeat("x", 200)+"\n\n"), 100)
	if _, err := d.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("got %v", err)
	}
	d.Close()
	if _, err := d.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("after Close: %v, want ErrLineTooLong still", err)
	}
}

// Many decoders at once, each closed after its stream, with lines that
// outgrow the first buffer: every event comes out whole (run with -race).
func TestClosedBuffersReusedConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				long := strings.Repeat(fmt.Sprint(g), 100*(i%70)) // up to ~7 KB: grows past the first buffer
				in := fmt.Sprintf("data: a%d-%d\n\ndata: %s\n\ndata: z%d-%d\n\n", g, i, long, g, i)
				d := NewDecoder(strings.NewReader(in))
				var got []string
				for {
					ev, err := d.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Error(err)
						return
					}
					got = append(got, string(ev.Data))
				}
				d.Close()
				want := []string{fmt.Sprintf("a%d-%d", g, i), long, fmt.Sprintf("z%d-%d", g, i)}
				if strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("decoder %d/%d: got %d events, first %.20q", g, i, len(got), got)
					return
				}
			}
		})
	}
	wg.Wait()
}
