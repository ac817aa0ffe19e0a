// Package sse decodes a text/event-stream (Server-Sent Events) body into
// events, as both provider adapters receive them.
//
// The decoder follows the WHATWG event-stream rules where they matter for
// model APIs, and is stricter about the rest:
//
//   - lines end with CRLF, LF or a lone CR;
//   - "data:" with or without one leading space; several data lines of one
//     event are joined with "\n";
//   - lines starting with ':' are comments (keep-alives) and are skipped;
//     unknown fields ("retry:", "future:") are ignored;
//   - an event whose blank line never came (the body ended right after its
//     last field) is still dispatched at EOF, so a final usage or finish
//     chunk is never dropped; whether the stream as a whole ended properly
//     is the adapter's business (it looks for its own end marker);
//   - a single line longer than the bound, or an event whose data grows
//     beyond it, is an error matching ErrLineTooLong or ErrEventTooLarge;
//     memory stays within about the bound plus one read chunk, however long
//     the offending line is.
//
// A Decoder is not safe for concurrent use. Close hands its read buffer
// back for reuse by later decoders; decoders that are never closed simply
// leave theirs to the garbage collector.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxLine is the default bound on one line and on one event's data:
// 32 MiB, what the official Go SDKs accept.
const DefaultMaxLine = 32 << 20

// bom is the UTF-8 byte order mark a stream may start with; it is skipped.
const bom = "\xEF\xBB\xBF"

// firstBuf is the size of a decoder's first buffer: enough for the
// events of a typical model stream, which are a few hundred bytes, so a
// short stream costs little memory. The buffer doubles while a line does
// not fit.
const firstBuf = 4 << 10

// readChunk is the slack over the bound the buffer may grow to.
const readChunk = 32 << 10

// firstBufs holds first buffers handed back by Close.
var firstBufs = sync.Pool{New: func() any { return new([firstBuf]byte) }}

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("sse: decoder closed")

// ErrLineTooLong is matched (errors.Is) by the error for a line longer than
// the decoder's bound.
var ErrLineTooLong = errors.New("sse: line too long")

// ErrEventTooLarge is matched (errors.Is) by the error for an event whose
// data lines together exceed the decoder's bound.
var ErrEventTooLarge = errors.New("sse: event too large")

// Event is one dispatched event.
//
// Data is owned by the Decoder and valid only until the next call to Next;
// copy it to keep it.
type Event struct {
	Type string // the "event:" field, "" when there was none
	Data []byte // the data lines joined with "\n"
	ID   string // the last "id:" seen in the stream, as the spec says
}

// Decoder reads events from a stream.
type Decoder struct {
	r   io.Reader
	max int

	buf        []byte // buf[start:end] holds unread bytes
	start, end int
	skipLF     bool // the last line ended with CR; drop an LF that follows
	bom        bool // the BOM check is done
	eof        bool
	err        error // sticky error, returned once the buffer is drained
	empty      int   // consecutive reads that returned nothing
	scanned    int   // bytes of buf[start:end] known to hold no line end

	data     []byte
	sawData  bool
	typ      []byte
	sawType  bool
	lastType string // interned to avoid a string per event
	id       string
}

// NewDecoder returns a decoder reading r, with lines and events bounded by
// DefaultMaxLine.
func NewDecoder(r io.Reader) *Decoder { return NewDecoderSize(r, DefaultMaxLine) }

// NewDecoderSize returns a decoder reading r, with lines and events bounded
// by maxLine bytes (DefaultMaxLine when maxLine <= 0).
func NewDecoderSize(r io.Reader, maxLine int) *Decoder {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return &Decoder{r: r, max: maxLine}
}

// Next returns the next event. At the clean end of the stream it returns
// io.EOF; a read error is returned as it is; a line or event over the bound
// returns an error matching ErrLineTooLong or ErrEventTooLarge. After an
// error every call returns an error again.
func (d *Decoder) Next() (Event, error) {
	for {
		line, ok, err := d.line()
		if err != nil {
			if err == io.EOF && d.sawData {
				// The stream ended inside an event: dispatch it rather
				// than drop what may be the final chunk.
				return d.dispatch(), nil
			}
			return Event{}, err
		}
		if !ok {
			continue
		}
		if len(line) == 0 {
			if d.sawData {
				return d.dispatch(), nil
			}
			// A blank line with no data resets the event.
			d.typ, d.sawType = d.typ[:0], false
			continue
		}
		if err := d.field(line); err != nil {
			d.err = err
			// Let go of the buffers: the stream is unusable now, and what
			// is left of the event must not come out of a later call.
			d.buf, d.start, d.end, d.data = nil, 0, 0, nil
			return Event{}, err
		}
	}
}

func (d *Decoder) dispatch() Event {
	ev := Event{Data: d.data, ID: d.id}
	if d.sawType {
		if string(d.typ) != d.lastType {
			d.lastType = string(d.typ)
		}
		ev.Type = d.lastType
	}
	d.data, d.sawData = d.data[:0], false
	d.typ, d.sawType = d.typ[:0], false
	return ev
}

func (d *Decoder) field(line []byte) error {
	if line[0] == ':' {
		return nil
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		n := len(d.data) + len(value)
		if d.sawData {
			n++
		}
		if n > d.max {
			return fmt.Errorf("%w: one event's data exceeds %d bytes", ErrEventTooLarge, d.max)
		}
		if n > cap(d.data) {
			// Grow by doubling, as the line buffer does: append's gentler
			// growth for large slices would allocate about five times the
			// bound in total on the way to it. Past half the bound the
			// next size is the bound itself.
			size := max(n, 2*cap(d.data))
			if size > d.max/2 {
				size = d.max
			}
			nd := make([]byte, len(d.data), size)
			copy(nd, d.data)
			d.data = nd
		}
		if d.sawData {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.sawData = true
	case "event":
		d.typ = append(d.typ[:0], value...)
		d.sawType = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 && string(value) != d.id {
			d.id = string(value)
		}
	}
	return nil
}

// line returns the next line without its terminator. ok is false when
// nothing usable was produced yet (the caller loops).
func (d *Decoder) line() (line []byte, ok bool, err error) {
	for {
		if d.skipLF && d.start < d.end {
			if d.buf[d.start] == '\n' {
				d.start++
			}
			d.skipLF = false
		}
		if !d.bom {
			u := d.buf[d.start:d.end]
			if len(u) < len(bom) && !d.eof && d.err == nil && bytes.HasPrefix([]byte(bom), u) {
				d.fill() // too few bytes to tell
				continue
			}
			if bytes.HasPrefix(u, []byte(bom)) {
				d.start += len(bom)
			}
			d.bom = true
		}
		unread := d.buf[d.start:d.end]
		// Only bytes not looked at before are searched, so a long line
		// arriving in many reads costs linear time.
		if i := lineEnd(unread[d.scanned:]); i >= 0 {
			i += d.scanned
			d.scanned = 0
			if i > d.max {
				return nil, false, d.tooLong()
			}
			d.start += i + 1
			if unread[i] == '\r' {
				d.skipLF = true
			}
			return unread[:i], true, nil
		}
		d.scanned = len(unread)
		if len(unread) > d.max {
			return nil, false, d.tooLong()
		}
		if d.err != nil {
			return nil, false, d.err
		}
		if d.eof {
			if len(unread) > 0 {
				// A last line without a terminator.
				d.start, d.scanned = d.end, 0
				return unread, true, nil
			}
			d.err = io.EOF
			return nil, false, io.EOF
		}
		d.fill()
	}
}

// lineEnd returns the index of the first CR or LF in b, or -1. Two
// IndexByte scans are much faster than IndexAny's byte loop; the CR scan
// stops at the LF, since a stream with CRLF or LF endings has none before.
func lineEnd(b []byte) int {
	lf := bytes.IndexByte(b, '\n')
	if lf < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if cr := bytes.IndexByte(b[:lf], '\r'); cr >= 0 {
		return cr
	}
	return lf
}

// Close ends the decoder's use of its read buffer, which later decoders
// may reuse; Next returns ErrClosed from then on. It does not close the
// reader. Events already returned stay valid (their data is not in that
// buffer). Close is safe to call more than once.
func (d *Decoder) Close() {
	if d.err == nil || d.err == io.EOF {
		d.err = ErrClosed
	}
	if len(d.buf) == firstBuf {
		firstBufs.Put((*[firstBuf]byte)(d.buf))
	}
	d.buf, d.start, d.end, d.scanned = nil, 0, 0, 0
	d.eof = false
}

func (d *Decoder) tooLong() error {
	d.err = fmt.Errorf("%w: a line exceeds %d bytes", ErrLineTooLong, d.max)
	// Let go of the buffer: the stream is unusable now.
	d.buf, d.start, d.end = nil, 0, 0
	return d.err
}

// fill reads once into the buffer, moving unread bytes to the front and
// growing the buffer (by doubling, up to the bound plus one chunk) only
// when one unfinished line fills half of it.
func (d *Decoder) fill() {
	if d.start > 0 {
		n := copy(d.buf, d.buf[d.start:d.end])
		d.start, d.end = 0, n
	}
	if len(d.buf)-d.end <= len(d.buf)/2 {
		size := 2 * len(d.buf)
		if size < firstBuf {
			size = firstBuf
		}
		if limit := d.max + readChunk; size >= d.max {
			size = limit
		}
		if size > len(d.buf) {
			var nb []byte
			if size == firstBuf {
				nb = firstBufs.Get().(*[firstBuf]byte)[:]
			} else {
				nb = make([]byte, size)
			}
			copy(nb, d.buf[:d.end])
			if len(d.buf) == firstBuf {
				firstBufs.Put((*[firstBuf]byte)(d.buf))
			}
			d.buf = nb
		}
	}
	n, err := d.r.Read(d.buf[d.end:])
	d.end += n
	if n == 0 && err == nil {
		d.empty++
		if d.empty >= 100 {
			err = io.ErrNoProgress
		}
	} else {
		d.empty = 0
	}
	if err == io.EOF {
		d.eof = true
	} else if err != nil {
		d.err = err
	}
}
