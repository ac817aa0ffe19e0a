package model

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/loomkit/loom/llm"
)

// RetryInfo describes one retry about to happen: attempt Attempt (1 for the
// first call) failed with Err, and the next attempt starts after Wait.
type RetryInfo struct {
	Attempt int
	Wait    time.Duration
	Err     error
}

type retryObserversKey struct{}

type attemptKey struct{}

type noRetryKey struct{}

// WithoutRetry returns a context under which the Retry middleware makes a
// single attempt and passes its outcome on unchanged. A driver that
// retries calls itself (a Temporal activity, say) uses it so that a model
// wrapped in Retry does not multiply its attempts or hide them.
func WithoutRetry(ctx context.Context) context.Context {
	return context.WithValue(ctx, noRetryKey{}, true)
}

func retryOff(ctx context.Context) bool {
	off, _ := ctx.Value(noRetryKey{}).(bool)
	return off
}

// WithRetryObserver returns a context under which every retry made by the
// Retry middleware for a call is reported to fn, before its wait, in
// addition to RetryPolicy.OnRetry. A driver uses it to turn retries into
// events of its own run. Observers accumulate: an inner WithRetryObserver
// adds to those already in ctx. fn is called on the goroutine that made
// the call.
func WithRetryObserver(ctx context.Context, fn func(RetryInfo)) context.Context {
	if fn == nil {
		return ctx
	}
	prev, _ := ctx.Value(retryObserversKey{}).([]func(RetryInfo))
	obs := make([]func(RetryInfo), len(prev), len(prev)+1)
	copy(obs, prev)
	return context.WithValue(ctx, retryObserversKey{}, append(obs, fn))
}

func retryObservers(ctx context.Context) []func(RetryInfo) {
	obs, _ := ctx.Value(retryObserversKey{}).([]func(RetryInfo))
	return obs
}

// RetryAttempt returns how many times the Retry middleware has already
// retried the call that ctx belongs to: 0 for the first attempt. Adapters
// send it to the provider as an attempt counter header.
func RetryAttempt(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

func withAttempt(ctx context.Context, n int) context.Context {
	if n == 0 && RetryAttempt(ctx) == 0 {
		return ctx
	}
	return context.WithValue(ctx, attemptKey{}, n)
}

// Defaults of a zero RetryPolicy.
const (
	DefaultMaxRetries    = 3
	DefaultBaseDelay     = 500 * time.Millisecond
	DefaultMaxDelay      = 8 * time.Second
	DefaultMaxRetryAfter = 60 * time.Second
	DefaultRetryBudget   = 5 * time.Minute
)

// RetryPolicy says when and how long Retry waits before sending a failed
// call again. The zero value is the default policy.
//
// Which failures are retried: by default those for which IsRetryable holds,
// that is the provider's x-should-retry verdict when it gave one, else the
// Kind: rate limits (429), overload (529, overloaded stream events), server
// errors (409, 5xx), network failures, timeouts (408, stalls) and truncated
// streams. Bad requests, auth, permission, not found, request too large,
// context too long, quota exhaustion and answers too large (a model that
// did not stop would be paid for again) are never retried.
//
// How long: the provider's retry-after hint when it gave one (retry-after-ms
// wins over retry-after), else exponential backoff from BaseDelay doubling
// up to MaxDelay, each wait reduced by up to 25% at random so that clients
// that failed together do not retry together.
type RetryPolicy struct {
	// MaxRetries is how many times a call is retried after its first
	// attempt: 0 means DefaultMaxRetries (3), a negative value none.
	MaxRetries int
	// BaseDelay is the first backoff (0: DefaultBaseDelay, 0.5 s).
	BaseDelay time.Duration
	// MaxDelay caps the backoff (0: DefaultMaxDelay, 8 s).
	MaxDelay time.Duration
	// MaxRetryAfter is the longest retry-after hint that is honoured
	// (0: DefaultMaxRetryAfter, 60 s; negative: no cap). A longer hint
	// fails the call at once with the provider's error, which carries the
	// hint in RetryAfter, instead of sleeping for an hour.
	MaxRetryAfter time.Duration
	// Budget bounds the wall-clock time from the first attempt to the
	// start of the last one (0: DefaultRetryBudget, 5 min; negative: no
	// budget). A retry whose wait would end past it is not made.
	Budget time.Duration
	// ShouldRetry, if set, replaces IsRetryable as the test of whether a
	// failure is worth retrying.
	ShouldRetry func(err error) bool
	// OnRetry, if set, is called before each wait, after the observers
	// of WithRetryObserver.
	OnRetry func(RetryInfo)
	// Logger, if set, gets one warning per retry.
	Logger *slog.Logger
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	switch {
	case p.MaxRetries == 0:
		p.MaxRetries = DefaultMaxRetries
	case p.MaxRetries < 0:
		p.MaxRetries = 0
	}
	def(&p.BaseDelay, DefaultBaseDelay)
	def(&p.MaxDelay, DefaultMaxDelay)
	def(&p.MaxRetryAfter, DefaultMaxRetryAfter)
	def(&p.Budget, DefaultRetryBudget)
	if p.ShouldRetry == nil {
		p.ShouldRetry = IsRetryable
	}
	return p
}

// Backoff returns the wait before retry n (1 for the first retry) when the
// provider gave no hint: BaseDelay·2^(n-1) capped at MaxDelay, reduced by
// a random fraction of up to 25%.
func (p RetryPolicy) Backoff(n int) time.Duration {
	p = p.withDefaults()
	d := p.BaseDelay
	for i := 1; i < n && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	return d - time.Duration(rand.Float64()*0.25*float64(d))
}

// Retry returns middleware that retries failed calls under policy p.
//
// Generate is retried as a whole. A Stream is retried only while nothing
// has reached the consumer: the provider's ResponseStart and early usage
// reports are held back until the first content event so that an overload
// announced right after the stream opened is still retried; once content
// has been yielded, a failure is yielded as the stream's last element and
// the caller (the driver) decides what to do.
//
// Under a context of WithoutRetry it makes one attempt and returns its
// outcome as it is. A cancelled context stops a wait at once; the call then returns an error
// matching ctx.Err(). When retries run out the last failure is returned,
// wrapped with how many attempts were made (errors.As still finds the
// *Error). Each retry is reported to the observers of WithRetryObserver,
// to p.OnRetry and to p.Logger, and the attempt number is available to the
// adapter through RetryAttempt.
//
// The middleware is safe for concurrent use if p's callbacks are.
func Retry(p RetryPolicy) Middleware {
	p = p.withDefaults()
	return func(next Model) Model {
		r := &retrier{p: p, next: next}
		return Funcs{GenerateFunc: r.generate, StreamFunc: r.stream}
	}
}

type retrier struct {
	p    RetryPolicy
	next Model
}

func (r *retrier) generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	if retryOff(ctx) {
		return r.next.Generate(ctx, req)
	}
	start := time.Now()
	for attempt := 0; ; attempt++ {
		resp, err := r.next.Generate(withAttempt(ctx, attempt), req)
		if err == nil {
			return resp, nil
		}
		if err := r.wait(ctx, start, attempt, err); err != nil {
			return resp, err
		}
	}
}

func (r *retrier) stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	if retryOff(ctx) {
		return r.next.Stream(ctx, req)
	}
	var used atomic.Bool
	return func(yield func(llm.Event, error) bool) {
		if used.Swap(true) {
			yield(nil, errors.New("model: a stream can be ranged over only once; call Stream again for a new call"))
			return
		}
		start := time.Now()
		for attempt := 0; ; attempt++ {
			var held []llm.Event // identity and usage not yet passed on
			visible := false
			var failure error
			for ev, err := range r.next.Stream(withAttempt(ctx, attempt), req) {
				if err != nil {
					failure = err
					break
				}
				if !visible {
					switch ev.(type) {
					case llm.ResponseStart, llm.UsageReport:
						held = append(held, ev)
						continue
					}
					visible = true
					for _, h := range held {
						if !yield(h, nil) {
							return
						}
					}
					held = nil
				}
				if !yield(ev, nil) {
					return
				}
			}
			if failure == nil {
				for _, h := range held {
					if !yield(h, nil) {
						return
					}
				}
				return
			}
			if visible {
				yield(nil, failure)
				return
			}
			if err := r.wait(ctx, start, attempt, failure); err != nil {
				yield(nil, err)
				return
			}
		}
	}
}

// wait decides whether attempt (0-based) that failed with err is retried.
// It returns nil after waiting, or the error to return instead.
func (r *retrier) wait(ctx context.Context, start time.Time, attempt int, err error) error {
	if !r.p.ShouldRetry(err) {
		return err
	}
	if attempt >= r.p.MaxRetries {
		if attempt == 0 {
			return err
		}
		return fmt.Errorf("model: gave up after %d attempts: %w", attempt+1, err)
	}
	var wait time.Duration
	var me *Error
	if errors.As(err, &me) && me.RetryAfter > 0 {
		if r.p.MaxRetryAfter > 0 && me.RetryAfter > r.p.MaxRetryAfter {
			return fmt.Errorf("model: the provider asks to wait %s before retrying, more than the %s the retry policy allows; not retrying: %w",
				me.RetryAfter, r.p.MaxRetryAfter, err)
		}
		wait = me.RetryAfter
	} else {
		wait = r.p.Backoff(attempt + 1)
	}
	if r.p.Budget > 0 && time.Since(start)+wait > r.p.Budget {
		return fmt.Errorf("model: gave up after %d attempts: the next retry would start past the %s retry budget: %w",
			attempt+1, r.p.Budget, err)
	}
	info := RetryInfo{Attempt: attempt + 1, Wait: wait, Err: err}
	for _, fn := range retryObservers(ctx) {
		fn(info)
	}
	if r.p.OnRetry != nil {
		r.p.OnRetry(info)
	}
	if r.p.Logger != nil {
		r.p.Logger.LogAttrs(ctx, slog.LevelWarn, "model: retrying a failed call",
			slog.Int("attempt", info.Attempt), slog.Duration("wait", wait),
			slog.String("kind", string(KindOf(err))), slog.String("error", Redact(err.Error())))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("model: not retrying: %w", err)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("model: cancelled while waiting to retry: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}
