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
// middleware is safe for concurrent use.
func Log(logger *slog.Logger) Middleware {
	return func(next Model) Model {
		l := logger
		if l == nil {
			l = slog.Default()
		}
		return Funcs{
			GenerateFunc: func(ctx context.Context, req llm.Request) (llm.Response, error) {
				start := time.Now()
				resp, err := next.Generate(ctx, req)
				logCall(ctx, l, "generate", req, start, resp, err)
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
					logCall(ctx, l, "stream", req, start, acc.Response(), failure)
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

func logCall(ctx context.Context, l *slog.Logger, how string, req llm.Request, start time.Time, resp llm.Response, err error) {
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
		attrs = append(attrs, slog.String("error", Redact(err.Error())))
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
// their vendor prefixes, bearer tokens, and key=value or "key": "value"
// pairs whose name says key, token, secret or password.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`\b(sk|rk|pk)-[A-Za-z0-9_\-]{6,}`),
	regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}`),
	regexp.MustCompile(`(?i)((?:api[_-]?key|x-api-key|access[_-]?token|token|secret|password|authorization)["']?\s*[:=]\s*["']?)[^\s"',;&]{4,}`),
}

// Redact returns s with anything that looks like a credential replaced by
// "[redacted]": OpenAI- and Anthropic-style keys (sk-..., sk-ant-...),
// bearer tokens, and values of key, token, secret, password and
// authorization fields. It is for log and error text; it is a safety net,
// not a guarantee that arbitrary secrets are found.
func Redact(s string) string {
	s = secretPatterns[0].ReplaceAllString(s, "[redacted]")
	s = secretPatterns[1].ReplaceAllString(s, "$1 [redacted]")
	s = secretPatterns[2].ReplaceAllString(s, "${1}[redacted]")
	return s
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
