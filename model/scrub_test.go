package model_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

// A key that no pattern of Redact recognises, as an OpenAI-compatible
// server may issue.
const plainKey = "loomtestkey-4f9c2a7e1b"

func scrubKey(s string) string { return strings.ReplaceAll(s, plainKey, "[redacted]") }

func TestRedactURLUserinfo(t *testing.T) {
	for in, want := range map[string]string{
		`Post "http://ada:hunter2@proxy.local:8080/v1/chat": dial tcp: refused`: `Post "http://[redacted]@proxy.local:8080/v1/chat": dial tcp: refused`,
		"base URL https://token@example.com/v1":                                 "base URL https://[redacted]@example.com/v1",
		"no userinfo in https://example.com/a@b":                                "no userinfo in https://example.com/a@b",
		"mail ada@example.com":                                                  "mail ada@example.com",
	} {
		if got := model.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// LogWith scrubs what its Scrub function says on top of Redact's
// patterns.
func TestLogWithScrubsSecrets(t *testing.T) {
	var buf bytes.Buffer
	failing := model.Funcs{GenerateFunc: func(context.Context, llm.Request) (llm.Response, error) {
		return llm.Response{}, &model.Error{Kind: model.KindAuth, Status: 401, Message: "invalid key " + plainKey}
	}}
	m := model.LogWith(model.LogOptions{Logger: slogJSON(&buf), Scrub: scrubKey})(failing)
	m.Generate(context.Background(), llm.Request{Model: "m"})
	if strings.Contains(buf.String(), plainKey) || !strings.Contains(buf.String(), "invalid key [redacted]") {
		t.Fatalf("log = %s", buf.String())
	}
}

// ScrubErrors scrubs every error a model returns, blocking and streamed,
// keeping its kind, status and chain.
func TestScrubErrors(t *testing.T) {
	cause := errors.New("body: {\"error\":\"bad key " + plainKey + "\"}")
	me := &model.Error{Kind: model.KindAuth, Status: 401, Type: "invalid_api_key", Message: "Incorrect API key " + plainKey,
		Raw: []byte(`{"key":"` + plainKey + `"}`), Err: cause}
	inner := model.Funcs{
		GenerateFunc: func(context.Context, llm.Request) (llm.Response, error) { return llm.Response{}, me },
		StreamFunc: func(context.Context, llm.Request) iter.Seq2[llm.Event, error] {
			return func(yield func(llm.Event, error) bool) {
				if !yield(llm.TextDelta{Text: "partial"}, nil) {
					return
				}
				yield(nil, me)
			}
		},
	}
	m := model.ScrubErrors(scrubKey)(inner)
	_, gerr := m.Generate(context.Background(), llm.Request{})
	var serr error
	for _, err := range m.Stream(context.Background(), llm.Request{}) {
		if err != nil {
			serr = err
		}
	}
	for _, err := range []error{gerr, serr} {
		var got *model.Error
		if !errors.As(err, &got) || got.Kind != model.KindAuth || got.Status != 401 || got.Type != "invalid_api_key" {
			t.Fatalf("err = %#v", err)
		}
		for _, s := range []string{err.Error(), got.Message, string(got.Raw), got.Err.Error()} {
			if strings.Contains(s, plainKey) {
				t.Errorf("%q keeps the key", s)
			}
		}
		if !errors.Is(err, cause) {
			t.Error("the cause is lost")
		}
		if strings.Contains(me.Message, "[redacted]") {
			t.Error("the model's own error was changed")
		}
	}
	// Other errors keep their chain too.
	plain := model.ScrubErrors(scrubKey)(model.Funcs{GenerateFunc: func(context.Context, llm.Request) (llm.Response, error) {
		return llm.Response{}, errors.Join(context.Canceled, errors.New("key "+plainKey))
	}})
	_, err := plain.Generate(context.Background(), llm.Request{})
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), plainKey) {
		t.Errorf("err = %v", err)
	}
}

// A wrapped *Error is found scrubbed by errors.As, and the wrapper's
// other causes are kept.
func TestScrubErrorsWrapped(t *testing.T) {
	me := &model.Error{Kind: model.KindAuth, Message: "bad " + plainKey}
	inner := model.Funcs{GenerateFunc: func(context.Context, llm.Request) (llm.Response, error) {
		return llm.Response{}, errors.Join(context.DeadlineExceeded, me)
	}}
	_, err := model.ScrubErrors(scrubKey)(inner).Generate(context.Background(), llm.Request{})
	var got *model.Error
	if !errors.As(err, &got) || strings.Contains(got.Message, plainKey) || strings.Contains(err.Error(), plainKey) {
		t.Fatalf("err = %v (%+v)", err, got)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("the wrapper's cause is lost")
	}
}
