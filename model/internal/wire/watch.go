package wire

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/loomkit/loom/model"
)

// DefaultIdleTimeout is how long a stream may send no bytes at all before
// it is abandoned as stalled.
const DefaultIdleTimeout = 90 * time.Second

// Watch guards one call against silence and against running too long.
// It derives the context the request is sent under; when the call has
// received no bytes for the idle time (counted from the start, so a server
// that never sends headers is caught too), or the total time has passed,
// it cancels that context with a KindTimeout *model.Error as the cause.
// Send, TransportError and the body returned by Body then report that
// error instead of a bare "context canceled".
//
// Keep-alive bytes (SSE comments, pings) count as activity for the idle
// timer; only the total deadline ends a stream that pings forever without
// content.
//
// Create one with NewWatch and call Stop when the call is over. Its
// methods are safe for concurrent use.
type Watch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	op     string
	idle   time.Duration
	idleT  *time.Timer
	totalT *time.Timer
}

// NewWatch returns the context to send the request under and its Watch.
// idle <= 0 disables the idle timer; total <= 0 disables the deadline.
func NewWatch(parent context.Context, op string, idle, total time.Duration) (context.Context, *Watch) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &Watch{ctx: ctx, cancel: cancel, op: op, idle: idle}
	if idle > 0 {
		w.idleT = time.AfterFunc(idle, func() {
			cancel(&model.Error{Kind: model.KindTimeout, Op: op,
				Message: fmt.Sprintf("the provider sent nothing for %s; the connection looks stalled", idle)})
		})
	}
	if total > 0 {
		w.totalT = time.AfterFunc(total, func() {
			cancel(&model.Error{Kind: model.KindTimeout, Op: op,
				Message: fmt.Sprintf("the call did not finish within %s", total)})
		})
	}
	return ctx, w
}

// Touch records activity: the idle timer starts over.
func (w *Watch) Touch() {
	if w.idleT != nil && w.ctx.Err() == nil {
		w.idleT.Reset(w.idle)
	}
}

// Stop ends the watch and cancels its context, releasing the connection.
// Call it once the body is no longer needed.
func (w *Watch) Stop() {
	if w.idleT != nil {
		w.idleT.Stop()
	}
	if w.totalT != nil {
		w.totalT.Stop()
	}
	w.cancel(context.Canceled)
}

// Err maps a failure under the watch's context, as TransportError does.
func (w *Watch) Err(err error) error { return TransportError(w.ctx, w.op, err) }

// Body wraps a response body so that every read that returns bytes
// touches the watch, and a read that fails returns the mapped error (the
// watch's timeout, the caller's cancellation, or a network error). io.EOF
// passes through unchanged.
func (w *Watch) Body(body io.ReadCloser) io.ReadCloser {
	return &watchedBody{body: body, w: w}
}

type watchedBody struct {
	body io.ReadCloser
	w    *Watch
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if n > 0 {
		b.w.Touch()
	}
	if err != nil && err != io.EOF {
		err = b.w.Err(err)
	} else if err == io.EOF && b.w.ctx.Err() != nil {
		// A body cut by our own cancellation can look like a clean end.
		err = b.w.Err(err)
	}
	return n, err
}

func (b *watchedBody) Close() error { return b.body.Close() }

// Limits resolves an adapter's IdleTimeout and Timeout settings: 0 is the
// default (DefaultIdleTimeout, defaultTimeout), a negative value disables
// the limit (0 here).
func Limits(idle, timeout, defaultTimeout time.Duration) (time.Duration, time.Duration) {
	resolve := func(d, def time.Duration) time.Duration {
		switch {
		case d == 0:
			return def
		case d < 0:
			return 0
		}
		return d
	}
	return resolve(idle, DefaultIdleTimeout), resolve(timeout, defaultTimeout)
}
