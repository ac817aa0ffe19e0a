package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler returns a slog.Handler that scrubs each record before h handles
// it: the message, and every attribute's value that is text or becomes
// text (errors, Stringers, other values formatted with %+v), in groups
// too. Numbers, booleans, times and durations pass as they are.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	return &handler{r: r, h: h}
}

type handler struct {
	r *Redactor
	h slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &handler{r: h.r, h: h.h.WithAttrs(clean)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, h: h.h.WithGroup(name)}
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, ga := range g {
			clean[i] = h.attr(ga)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.String(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, h.r.String(x.String()))
		case nil:
			return a
		default:
			return slog.String(a.Key, h.r.String(fmt.Sprintf("%+v", x)))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
