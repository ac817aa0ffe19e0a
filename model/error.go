package model

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies a provider failure by what the caller can do about it.
type Kind string

const (
	KindAuth            Kind = "auth"              // 401: the key is missing or wrong
	KindPermission      Kind = "permission"        // 403: the key may not do this
	KindBadRequest      Kind = "bad_request"       // 400/422: the request is wrong; fix it
	KindNotFound        Kind = "not_found"         // 404: no such model or endpoint
	KindRequestTooLarge Kind = "request_too_large" // 413: the body is too large; compact the history
	KindContextTooLong  Kind = "context_too_long"  // the prompt exceeds the model's context window
	KindRateLimited     Kind = "rate_limited"      // 429: slow down; RetryAfter says how long
	KindQuota           Kind = "quota_exhausted"   // no credit or spend limit reached; retrying will not help
	KindOverloaded      Kind = "overloaded"        // 529 or an overloaded stream event
	KindServer          Kind = "server"            // 5xx
	KindNetwork         Kind = "network"           // the connection failed or broke
	KindTimeout         Kind = "timeout"           // no answer, or no bytes, in time
	KindTruncatedStream Kind = "truncated_stream"  // a stream ended before its end marker
	KindInvalidResponse Kind = "invalid_response"  // the answer is not what the API documents
	KindAnswerTooLarge  Kind = "answer_too_large"  // the answer exceeds the adapter's bounds on content, parts or calls
)

// Error is a failed model call. Every error a Model returns for a failed
// call is, or wraps, an *Error; the zero Status means no HTTP response.
type Error struct {
	Kind       Kind
	Op         string        // what was being done: "openai: chat completions stream"
	Status     int           // HTTP status, 0 when there was none
	Type       string        // the provider's error type or code ("overloaded_error", "insufficient_quota")
	Message    string        // the provider's message, or ours
	RequestID  string        // the provider's request id, when it sent one
	RetryAfter time.Duration // what the provider asked to wait, 0 when it did not say
	// ShouldRetry is the provider's explicit verdict (x-should-retry), nil
	// when it gave none; it overrides the rule by Kind.
	ShouldRetry *bool
	Raw         []byte // the start of the provider's body, for debugging
	Err         error  // the cause, if any
}

func (e *Error) Error() string {
	msg := e.Op
	if msg != "" {
		msg += ": "
	}
	msg += string(e.Kind)
	if e.Status != 0 {
		msg += fmt.Sprintf(" (HTTP %d", e.Status)
		if e.Type != "" {
			msg += " " + e.Type
		}
		msg += ")"
	} else if e.Type != "" {
		msg += " (" + e.Type + ")"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Err != nil && (e.Message == "" || e.Message != e.Err.Error()) {
		msg += ": " + e.Err.Error()
	}
	if e.RequestID != "" {
		msg += " [request " + e.RequestID + "]"
	}
	if hint := e.Kind.hint(); hint != "" {
		msg += " (" + hint + ")"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether the same request may succeed if sent again:
// the provider's explicit verdict if it gave one, else the rule by Kind.
func (e *Error) Retryable() bool {
	if e.ShouldRetry != nil {
		return *e.ShouldRetry
	}
	return e.Kind.Retryable()
}

// Retryable reports whether failures of this kind are worth retrying.
func (k Kind) Retryable() bool {
	switch k {
	case KindRateLimited, KindOverloaded, KindServer, KindNetwork, KindTimeout, KindTruncatedStream:
		return true
	}
	return false
}

func (k Kind) hint() string {
	switch k {
	case KindAuth:
		return "check the API key"
	case KindQuota:
		return "the account has no credit or hit its spend limit; retrying will not help"
	case KindRequestTooLarge, KindContextTooLong:
		return "the history is too large; compact or shorten it"
	case KindNotFound:
		return "check the model name and base URL"
	case KindAnswerTooLarge:
		return "a model that does not stop is not retried; raise the bound if such answers are expected"
	}
	return ""
}

// KindOf returns the Kind of the *Error in err's chain, or "" if none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// IsRetryable reports whether err wraps a retryable *Error.
func IsRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable()
}
