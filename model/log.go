package model

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/loomkit/loom/llm"
)

// Log returns middleware that logs each call on logger when it ends: one
// record per call with the model, the sizes of the request, the duration
// and, on success, the finish reason, the usage and the provider's ids;
// on failure the error's Kind, status and request id, at level Warn.
//
// It never logs message content, tool arguments or credentials: error
// text passes through Redact first. A nil logger uses slog.Default(). The
// middleware is safe for concurrent use. LogWith also scrubs the secrets
// a program knows (its API keys), which no pattern can recognise.
func Log(logger *slog.Logger) Middleware {
	return LogWith(LogOptions{Logger: logger})
}

// LogOptions configures LogWith. The zero value is Log(nil).
type LogOptions struct {
	// Logger receives the records; nil means slog.Default().
	Logger *slog.Logger
	// Scrub, when set, is applied to error text after Redact: a function
	// that removes the secrets in use (the API keys a program was given,
	// which an error body may echo), whatever they look like. It must be
	// safe for concurrent use.
	Scrub func(string) string
}

// LogWith is Log with options.
func LogWith(o LogOptions) Middleware {
	scrub := func(s string) string {
		s = Redact(s)
		if o.Scrub != nil {
			s = o.Scrub(s)
		}
		return s
	}
	return func(next Model) Model {
		l := o.Logger
		if l == nil {
			l = slog.Default()
		}
		return Funcs{
			GenerateFunc: func(ctx context.Context, req llm.Request) (llm.Response, error) {
				start := time.Now()
				resp, err := next.Generate(ctx, req)
				logCall(ctx, l, scrub, "generate", req, start, resp, err)
				return resp, err
			},
			StreamFunc: func(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
				return func(yield func(llm.Event, error) bool) {
					start := time.Now()
					var acc llm.Accumulator
					var failure error
					stopped := false
					for ev, err := range next.Stream(ctx, req) {
						if err != nil {
							failure = err
						} else {
							acc.Add(ev)
						}
						if !yield(ev, err) {
							stopped = true
							break
						}
					}
					if stopped && failure == nil {
						l.LogAttrs(ctx, slog.LevelInfo, "model: stream abandoned by the consumer",
							append(requestAttrs(req), slog.Duration("duration", time.Since(start)))...)
						return
					}
					logCall(ctx, l, scrub, "stream", req, start, acc.Response(), failure)
				}
			},
		}
	}
}

func requestAttrs(req llm.Request) []slog.Attr {
	return []slog.Attr{
		slog.String("model", req.Model),
		slog.Int("messages", len(req.Messages)),
		slog.Int("tools", len(req.Tools)),
	}
}

func logCall(ctx context.Context, l *slog.Logger, scrub func(string) string, how string, req llm.Request, start time.Time, resp llm.Response, err error) {
	attrs := append(requestAttrs(req), slog.String("call", how), slog.Duration("duration", time.Since(start)))
	if err != nil {
		attrs = append(attrs, slog.String("kind", string(KindOf(err))))
		if e := asError(err); e != nil {
			if e.Status != 0 {
				attrs = append(attrs, slog.Int("status", e.Status))
			}
			if e.RequestID != "" {
				attrs = append(attrs, slog.String("request_id", e.RequestID))
			}
		}
		attrs = append(attrs, slog.String("error", scrub(err.Error())))
		l.LogAttrs(ctx, slog.LevelWarn, "model: call failed", attrs...)
		return
	}
	attrs = append(attrs,
		slog.String("finish", string(resp.FinishReason)),
		slog.Int("tool_calls", len(resp.ToolCalls())),
		slog.Int64("input_tokens", resp.Usage.InputTokens),
		slog.Int64("output_tokens", resp.Usage.OutputTokens),
	)
	if resp.Usage.CacheReadTokens != 0 {
		attrs = append(attrs, slog.Int64("cache_read_tokens", resp.Usage.CacheReadTokens))
	}
	if resp.Truncated {
		attrs = append(attrs, slog.Bool("truncated", true))
	}
	if resp.ID != "" {
		attrs = append(attrs, slog.String("response_id", resp.ID))
	}
	if resp.RequestID != "" {
		attrs = append(attrs, slog.String("request_id", resp.RequestID))
	}
	l.LogAttrs(ctx, slog.LevelInfo, "model: call", attrs...)
}

func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// secretPatterns match credentials as they may appear in text: API keys by
// their vendor prefixes, bearer tokens, key=value or "key": "value" pairs
// whose name says key, token, secret or password, and the userinfo of
// URLs (scheme://user:password@host).
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`\b(sk|rk|pk)-[A-Za-z0-9_\-]{6,}`),
	regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}`),
	regexp.MustCompile(`(?i)((?:api[_-]?key|x-api-key|access[_-]?token|token|secret|password|authorization)["']?\s*[:=]\s*["']?)[^\s"',;&]{4,}`),
	regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.\-]*://)[^/?#\s@"'<>\\]+@`),
}

// Redact returns s with anything that looks like a credential replaced by
// "[redacted]": OpenAI- and Anthropic-style keys (sk-..., sk-ant-...),
// bearer tokens, values of key, token, secret, password and
// authorization fields, and the userinfo of URLs. It is for log and error
// text; it is a safety net, not a guarantee that arbitrary secrets are
// found: scrub the secrets a program knows by value (LogOptions.Scrub,
// ScrubErrors).
func Redact(s string) string {
	s = secretPatterns[0].ReplaceAllString(s, "[redacted]")
	s = secretPatterns[1].ReplaceAllString(s, "$1 [redacted]")
	s = secretPatterns[2].ReplaceAllString(s, "${1}[redacted]")
	s = secretPatterns[3].ReplaceAllString(s, "${1}[redacted]@")
	return s
}

// ScrubErrors returns middleware that passes the text of every error next
// returns, blocking or streamed, through scrub before it leaves: the
// errors a program prints, logs, records in a journal or sends to a
// workflow service then hold no secret scrub knows, such as an API key a
// provider's error body echoes. A *Error is copied with its Message, Type
// and Raw scrubbed and its cause's text too; Kind, Status and the other
// facts are kept, and errors.Is and errors.As still reach the original
// causes. Events pass unchanged. scrub must be safe for concurrent use.
func ScrubErrors(scrub func(string) string) Middleware {
	return func(next Model) Model {
		return Funcs{
			GenerateFunc: func(ctx context.Context, req llm.Request) (llm.Response, error) {
				resp, err := next.Generate(ctx, req)
				return resp, scrubError(err, scrub)
			},
			StreamFunc: func(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
				return func(yield func(llm.Event, error) bool) {
					for ev, err := range next.Stream(ctx, req) {
						if !yield(ev, scrubError(err, scrub)) {
							return
						}
					}
				}
			},
		}
	}
}

// scrubbedError is an error whose text was scrubbed; it unwraps to the
// original, after the scrubbed copy of the *Error in it when there is
// one, so that errors.As finds the copy and errors.Is every cause.
type scrubbedError struct {
	msg  string
	copy *Error
	err  error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() []error {
	if e.copy != nil {
		return []error{e.copy, e.err}
	}
	return []error{e.err}
}

func scrubError(err error, scrub func(string) string) error {
	if err == nil {
		return nil
	}
	var me *Error
	if !errors.As(err, &me) {
		if msg := scrub(err.Error()); msg != err.Error() {
			return &scrubbedError{msg: msg, err: err}
		}
		return err
	}
	c := *me
	c.Message, c.Type = scrub(me.Message), scrub(me.Type)
	if len(me.Raw) > 0 {
		c.Raw = []byte(scrub(string(me.Raw)))
	}
	if me.Err != nil {
		c.Err = &scrubbedError{msg: scrub(me.Err.Error()), err: me.Err}
	}
	if err == error(me) {
		return &c
	}
	// me is wrapped: keep the wrapper's words, scrubbed, around the copy.
	return &scrubbedError{msg: scrub(err.Error()), copy: &c, err: err}
}

// RedactHeader returns a copy of h fit for logging: the values of
// Authorization, Proxy-Authorization, Cookie, Set-Cookie and of every
// header whose name contains key, token, secret or auth are replaced by
// "[redacted]".
func RedactHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		if sensitiveHeader(k) {
			out[k] = []string{"[redacted]"}
			continue
		}
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func sensitiveHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "cookie", "set-cookie":
		return true
	}
	for _, w := range []string{"auth", "key", "token", "secret"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
