package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/loomkit/loom/internal/redact"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/store"
)

// loom's secrets stay in loom: one redactor, built from the credentials
// loom is given, scrubs everything that leaves the process, at the few
// places where it leaves: the writers behind standard output and error
// (every line loom prints, text or JSON), the log handler, the trace
// exporter, the errors of the model (which go on to the journal and to
// Temporal), and the run store. A new print path writes to one of these,
// so it cannot forget to scrub.

// newRedactor returns the redactor of the credentials in the environment:
// every provider's API key, the userinfo of the base URL variables, and
// the values of the OTLP exporter's headers. The flags' credentials are
// added when they are parsed (addEndpoint).
func newRedactor(getenv func(string) string) *redact.Redactor {
	var secrets []string
	for _, p := range providers {
		secrets = append(secrets, getenv(p.keyVar))
		if p.baseURLVar != "" {
			secrets = append(secrets, userinfoSecrets(getenv(p.baseURLVar))...)
		}
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for _, kv := range strings.Split(getenv(v), ",") {
			if _, val, ok := strings.Cut(kv, "="); ok {
				if dec, err := url.QueryUnescape(strings.TrimSpace(val)); err == nil {
					val = dec
				}
				secrets = append(secrets, strings.TrimSpace(val))
			}
		}
	}
	return redact.New(secrets...)
}

// addEndpoint adds the credentials of a model's endpoint to the
// redactor: its key and the userinfo of its base URL.
func (a *app) addEndpoint(base, key string) {
	a.red.Add(append(userinfoSecrets(base), key)...)
}

// userinfoSecrets returns the user name and password of a URL.
func userinfoSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return nil
	}
	out := []string{u.User.Username(), u.User.String()}
	if pw, ok := u.User.Password(); ok {
		out = append(out, pw)
	}
	return out
}

// withoutUserinfo returns raw without the userinfo of its URL, and whether
// it had one.
func withoutUserinfo(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw, false
	}
	u.User = nil
	return u.String(), true
}

// fileOf returns the file behind w, through the writers that scrub it.
func fileOf(w io.Writer) (*os.File, bool) {
	for {
		switch x := w.(type) {
		case *os.File:
			return x, true
		case interface{ Unwrap() io.Writer }:
			w = x.Unwrap()
		default:
			return nil, false
		}
	}
}

// scrubStore is the run store as the agent sees it: what is appended is
// scrubbed first, so the store never holds a secret (a key a provider's
// error echoed into run_failed, one a tool printed).
type scrubStore struct {
	store.Store
	red *redact.Redactor
}

func (s scrubStore) Append(ctx context.Context, runID string, expectedSeq int64, recs ...store.Record) (int64, error) {
	out := recs
	for i, r := range recs {
		data := scrubJSON(s.red, r.Data)
		if &out[0] == &recs[0] && !bytes.Equal(data, r.Data) {
			out = append([]store.Record(nil), recs...)
		}
		out[i].Data = data
	}
	return s.Store.Append(ctx, runID, expectedSeq, out...)
}

func (s scrubStore) AppendConversation(ctx context.Context, convID, runID string, msgs []llm.Message) error {
	out := make([]llm.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		b, err := json.Marshal(m)
		if err != nil {
			continue // the store refuses it with the same error
		}
		if clean := scrubJSON(s.red, b); !bytes.Equal(clean, b) {
			var sm llm.Message
			if err := json.Unmarshal(clean, &sm); err == nil {
				out[i] = sm
			}
		}
	}
	return s.Store.AppendConversation(ctx, convID, runID, out)
}

// scrubJSON scrubs a JSON document. Secrets sit in its strings, so
// scrubbing the bytes keeps it valid; should a secret have stood for a
// number or a name, the strings are scrubbed one by one instead.
func scrubJSON(red *redact.Redactor, data []byte) []byte {
	clean := red.Bytes(data)
	if len(clean) == len(data) && bytes.Equal(clean, data) || json.Valid(clean) {
		return clean
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return clean
	}
	b, err := json.Marshal(scrubValue(red, v))
	if err != nil {
		return clean
	}
	return b
}

func scrubValue(red *redact.Redactor, v any) any {
	switch x := v.(type) {
	case string:
		return red.String(x)
	case json.Number:
		if s := red.String(string(x)); s != string(x) {
			return s
		}
		return x
	case []any:
		for i := range x {
			x[i] = scrubValue(red, x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[red.String(k)] = scrubValue(red, e)
		}
		return out
	}
	return v
}

// scrubExporter exports spans with every text they carry scrubbed: names,
// attributes (gen_ai content, exception messages, the Temporal SDK's),
// events, links and the status.
type scrubExporter struct {
	sdktrace.SpanExporter
	red *redact.Redactor
}

func (e scrubExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = scrubbedSpan{ReadOnlySpan: s, red: e.red}
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}

// scrubbedSpan is a span as exported: the recorded span, its texts
// scrubbed.
type scrubbedSpan struct {
	sdktrace.ReadOnlySpan
	red *redact.Redactor
}

func (s scrubbedSpan) Name() string { return s.red.String(s.ReadOnlySpan.Name()) }

func (s scrubbedSpan) Attributes() []attribute.KeyValue {
	return scrubAttrs(s.red, s.ReadOnlySpan.Attributes())
}

func (s scrubbedSpan) Events() []sdktrace.Event {
	evs := s.ReadOnlySpan.Events()
	out := make([]sdktrace.Event, len(evs))
	for i, ev := range evs {
		ev.Name = s.red.String(ev.Name)
		ev.Attributes = scrubAttrs(s.red, ev.Attributes)
		out[i] = ev
	}
	return out
}

func (s scrubbedSpan) Links() []sdktrace.Link {
	ls := s.ReadOnlySpan.Links()
	out := make([]sdktrace.Link, len(ls))
	for i, l := range ls {
		l.Attributes = scrubAttrs(s.red, l.Attributes)
		out[i] = l
	}
	return out
}

func (s scrubbedSpan) Status() sdktrace.Status {
	st := s.ReadOnlySpan.Status()
	st.Description = s.red.String(st.Description)
	return st
}

func scrubAttrs(red *redact.Redactor, attrs []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(attrs))
	for i, kv := range attrs {
		switch kv.Value.Type() {
		case attribute.STRING:
			kv.Value = attribute.StringValue(red.String(kv.Value.AsString()))
		case attribute.STRINGSLICE:
			ss := kv.Value.AsStringSlice()
			for j := range ss {
				ss[j] = red.String(ss[j])
			}
			kv.Value = attribute.StringSliceValue(ss)
		}
		out[i] = kv
	}
	return out
}
