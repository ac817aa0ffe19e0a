package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// collect decodes all events of s, reading through r's wrapper, and
// renders them one per line as type|data|id.
func collect(t testing.TB, r io.Reader) ([]string, error) {
	t.Helper()
	d := NewDecoder(r)
	var out []string
	for {
		ev, err := d.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, fmt.Sprintf("%s|%s|%s", ev.Type, ev.Data, ev.ID))
	}
}

func TestDecoderForms(t *testing.T) {
	canonical := "event: a\ndata: one\n\ndata: two\ndata: three\n\n"
	want := []string{"a|one|", "|two\nthree|"}
	forms := map[string]string{
		"canonical":      canonical,
		"crlf":           strings.ReplaceAll(canonical, "\n", "\r\n"),
		"cr":             strings.ReplaceAll(canonical, "\n", "\r"),
		"no space":       "event:a\ndata:one\n\ndata:two\ndata:three\n\n",
		"comments":       ": keepalive\nevent: a\n: hi\ndata: one\n\n:\n\ndata: two\ndata: three\n\n: bye\n",
		"unknown fields": "retry: 100\nevent: a\nfuture: x\ndata: one\n\ndata: two\nbogus\ndata: three\n\n",
		"bom":            "\xEF\xBB\xBF" + canonical,
		"no final blank": "event: a\ndata: one\n\ndata: two\ndata: three\n",
		"no final eol":   "event: a\ndata: one\n\ndata: two\ndata: three",
		"mixed endings":  "event: a\r\ndata: one\r\rdata: two\ndata: three\r\n\r\n",
		"extra blanks":   "\n\n\nevent: a\ndata: one\n\n\n\ndata: two\ndata: three\n\n\n",
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"bytewise": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"halves":   func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
	}
	for name, in := range forms {
		for rname, mk := range readers {
			t.Run(name+"/"+rname, func(t *testing.T) {
				got, err := collect(t, mk(in))
				if err != nil {
					t.Fatalf("error: %v", err)
				}
				if strings.Join(got, ";") != strings.Join(want, ";") {
					t.Fatalf("got %q, want %q", got, want)
				}
			})
		}
	}
}

func TestDecoderFieldRules(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
	}{
		{"only one space stripped", "data:  two spaces\n\n", []string{"| two spaces|"}},
		{"empty data dispatches", "data:\n\n", []string{"||"}},
		{"empty data lines join", "data\ndata\n\n", []string{"|\n|"}},
		{"event without data is not dispatched", "event: ping\n\ndata: x\n\n", []string{"|x|"}},
		{"id persists", "id: 7\ndata: a\n\ndata: b\n\n", []string{"|a|7", "|b|7"}},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", []string{"|a|1", "|b|1"}},
		{"type resets between events", "event: x\ndata: a\n\ndata: b\n\n", []string{"x|a|", "|b|"}},
		{"colon in value kept", "data: {\"a\":\"b:c\"}\n\n", []string{`|{"a":"b:c"}|`}},
		{"empty stream", "", nil},
		{"only comments", ": a\n: b\n", nil},
		{"bom only", "\xEF\xBB\xBF", nil},
		{"bom not at start stays", "data: x\n\n\xEF\xBB\xBFdata: y\n\n", []string{"|x|"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := collect(t, strings.NewReader(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ";") != strings.Join(c.want, ";") {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestDecoderSplitCRLFAcrossReads(t *testing.T) {
	// The CR and LF of one terminator arrive in separate reads: the LF must
	// not count as a blank line.
	r := io.MultiReader(strings.NewReader("data: a\r"), strings.NewReader("\ndata: b\r"), strings.NewReader("\n\r\n"))
	got, err := collect(t, r)
	if err != nil {
		t.Fatal(err)
	}
	if want := "|a\nb|"; len(got) != 1 || got[0] != want {
		t.Fatalf("got %q, want [%q]", got, want)
	}
}

func TestDecoderReadErrorPassesThrough(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom))
	d := NewDecoder(r)
	ev, err := d.Next()
	if err != nil || string(ev.Data) != "a" {
		t.Fatalf("first: %q %v", ev.Data, err)
	}
	// The half-read event must not be dispatched: the error wins.
	if _, err := d.Next(); !errors.Is(err, boom) {
		t.Fatalf("second: %v, want boom", err)
	}
	if _, err := d.Next(); !errors.Is(err, boom) {
		t.Fatalf("error is not sticky: %v", err)
	}
}

func TestDecoderNoProgress(t *testing.T) {
	d := NewDecoder(zeroReader{})
	if _, err := d.Next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("got %v, want io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestDecoderLineTooLong(t *testing.T) {
	for _, term := range []string{"\n", ""} {
		d := NewDecoderSize(strings.NewReader("data: ok\n\ndata: "+strings.Repeat("x", 100)+term+"\n"), 64)
		if ev, err := d.Next(); err != nil || string(ev.Data) != "ok" {
			t.Fatalf("first: %q %v", ev.Data, err)
		}
		_, err := d.Next()
		if !errors.Is(err, ErrLineTooLong) {
			t.Fatalf("term %q: got %v, want ErrLineTooLong", term, err)
		}
		if _, err := d.Next(); !errors.Is(err, ErrLineTooLong) {
			t.Fatalf("not sticky: %v", err)
		}
	}
}

func TestDecoderEventTooLarge(t *testing.T) {
	in := strings.Repeat("data: "+strings.Repeat("y", 30)+"\n", 10) + "\n"
	_, err := collect(t, strings.NewReader(in))
	d := NewDecoderSize(strings.NewReader(in), 100)
	_, err = d.Next()
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("got %v, want ErrEventTooLarge", err)
	}
}

var xs = bytes.Repeat([]byte("x"), 64<<10)

// endless yields "data: " and then x forever, counting what it gave.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	if e.n == 0 {
		e.n = int64(copy(p, "data: "))
		return int(e.n), nil
	}
	n := copy(p, xs)
	e.n += int64(n)
	return n, nil
}

// TestDecoderHugeLineBoundedMemory feeds a 40 MiB line (ADVERSARIAL 23) and
// checks both the error and that the decoder never held much more than its
// bound.
func TestDecoderHugeLineBoundedMemory(t *testing.T) {
	src := &endless{}
	r := io.LimitReader(src, 40<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d := NewDecoder(r)
	_, err := d.Next()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("got %v, want ErrLineTooLong", err)
	}
	if src.n >= 40<<20 {
		t.Fatalf("decoder read the whole 40 MiB line (%d bytes) before failing", src.n)
	}
	// Growth by doubling to the bound allocates less than twice the bound
	// in total.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2*DefaultMaxLine+(1<<20) {
		t.Fatalf("allocated %d bytes for a line bounded at %d", alloc, DefaultMaxLine)
	}
}

func TestDecoderDataValidUntilNext(t *testing.T) {
	d := NewDecoder(strings.NewReader("data: first\n\ndata: second\n\n"))
	ev, _ := d.Next()
	kept := bytes.Clone(ev.Data)
	ev2, _ := d.Next()
	if string(kept) != "first" || string(ev2.Data) != "second" {
		t.Fatalf("got %q then %q", kept, ev2.Data)
	}
}

func FuzzDecoder(f *testing.F) {
	f.Add([]byte("event: a\ndata: one\n\ndata: two\r\ndata: three\r\n\r\n"), uint8(0))
	f.Add([]byte(": c\rdata:x\r\rid: 1\ndata"), uint8(3))
	f.Add([]byte("\xEF\xBB\xBFdata: [DONE]"), uint8(1))
	f.Add([]byte("data: "+strings.Repeat("z", 200)+"\n\n"), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		// Decoding must not depend on how reads are split, never panic,
		// and respect the bound.
		const max = 128
		decode := func(r io.Reader) ([]string, error) {
			d := NewDecoderSize(r, max)
			var out []string
			for {
				ev, err := d.Next()
				if err != nil {
					if err == io.EOF {
						return out, nil
					}
					return out, err
				}
				if len(ev.Data) > max {
					t.Fatalf("event data of %d bytes over bound %d", len(ev.Data), max)
				}
				out = append(out, ev.Type+"|"+string(ev.Data)+"|"+ev.ID)
			}
		}
		a, errA := decode(bytes.NewReader(in))
		var r io.Reader = bytes.NewReader(in)
		switch split % 3 {
		case 1:
			r = iotest.OneByteReader(r)
		case 2:
			r = iotest.HalfReader(r)
		}
		b, errB := decode(r)
		if (errA == nil) != (errB == nil) || strings.Join(a, "\x00") != strings.Join(b, "\x00") {
			t.Fatalf("split reads differ:\n%q %v\n%q %v", a, errA, b, errB)
		}
		if errA != nil && !errors.Is(errA, ErrLineTooLong) && !errors.Is(errA, ErrEventTooLarge) {
			t.Fatalf("unexpected error %v", errA)
		}
	})
}

// BenchmarkDecode1MB decodes a 1 MB stream of OpenAI-sized chunks.
func BenchmarkDecode1MB(b *testing.B) {
	chunk := "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello world \"}}]}\n\n"
	var buf bytes.Buffer
	for buf.Len() < 1<<20 {
		buf.WriteString(chunk)
	}
	in := buf.Bytes()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		d := NewDecoder(bytes.NewReader(in))
		for {
			if _, err := d.Next(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
	}
}
