package redact

import (
	"io"
	"strings"
	"sync"
)

// Stream scrubs text that arrives in pieces, such as the deltas of a
// streamed answer: Next returns what can be shown of a piece, holding back
// its end while it may be the start of a secret (or of a URL's userinfo)
// that the next piece completes; Flush returns what is held. A Stream is
// not safe for concurrent use.
type Stream struct {
	r    *Redactor
	held string // scrubbed, not given out yet
	seen string // the end of what was given out: a URL's scheme for a "://" still to come
}

// seenLen is how much of what a Stream gave out it keeps as context.
const seenLen = 64

// Stream returns a new Stream of r.
func (r *Redactor) Stream() *Stream { return &Stream{r: r} }

// Next takes the next piece and returns the text that is settled, scrubbed.
func (s *Stream) Next(piece string) string {
	// Scrubbed after the end of what was given out, so that a URL whose
	// scheme went out in an earlier piece is still recognised.
	full, end := s.r.scrub(s.seen + s.held + piece)
	if !strings.HasPrefix(full, s.seen) {
		// Cannot happen (what went out holds nothing to scrub); scrub the
		// new text alone rather than give out the old again.
		s.seen = ""
		full, end = s.r.scrub(s.held + piece)
	}
	n := s.r.hold(full, max(end, len(s.seen)), len(s.seen))
	out := full[len(s.seen) : len(full)-n]
	s.held = full[len(full)-n:]
	s.seen += out
	if len(s.seen) > seenLen {
		s.seen = s.seen[len(s.seen)-seenLen:]
	}
	return out
}

// Flush returns the text held back, and forgets it.
func (s *Stream) Flush() string {
	out := s.held
	s.held = ""
	s.seen += out
	if len(s.seen) > seenLen {
		s.seen = s.seen[len(s.seen)-seenLen:]
	}
	return out
}

// Writer is an io.Writer that writes what it is given to another one,
// scrubbed. It holds back the end of a write that may be the start of a
// secret until a later write settles it, so a secret split across writes
// is scrubbed too; Flush writes what is held. A Writer is safe for
// concurrent use.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
	s  *Stream
}

// Writer returns a Writer of r writing to w.
func (r *Redactor) Writer(w io.Writer) *Writer {
	return &Writer{w: w, s: r.Stream()}
}

// Write writes p, scrubbed; it reports len(p) written unless w failed.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.s.Next(string(p))
	if out == "" {
		return len(p), nil
	}
	if _, err := io.WriteString(w.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes the text held back.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if out := w.s.Flush(); out != "" {
		_, err := io.WriteString(w.w, out)
		return err
	}
	return nil
}

// Unwrap returns the writer w writes to (for terminal checks).
func (w *Writer) Unwrap() io.Writer { return w.w }
