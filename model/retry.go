package model

import (
	"context"
	"time"
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
