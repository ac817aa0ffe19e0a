package model_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

func TestRedact(t *testing.T) {
	cases := map[string]string{
		"Incorrect API key provided: sk-proj-AbCdEf123456789": "sk-proj-AbCdEf123456789",
		"key sk-ant-api03-xyzXYZ0123456789 rejected":          "sk-ant-api03-xyzXYZ0123456789",
		"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def":  "eyJhbGciOiJIUzI1NiJ9",
		`{"api_key": "hunter2hunter2"}`:                       "hunter2hunter2",
		"x-api-key=0123456789abcdef":                          "0123456789abcdef",
		"GET /v1?access_token=abcdef0123&x=1":                 "abcdef0123",
		"password: correct-horse-battery":                     "correct-horse-battery",
	}
	for in, secret := range cases {
		out := model.Redact(in)
		if strings.Contains(out, secret) || !strings.Contains(out, "[redacted]") {
			t.Errorf("Redact(%q) = %q", in, out)
		}
	}
	for _, keep := range []string{"rate limit reached for gpt-4o", "the model has no key named foo", "task-list"} {
		if out := model.Redact(keep); out != keep {
			t.Errorf("Redact(%q) = %q, want unchanged", keep, out)
		}
	}
}

func TestRedactHeader(t *testing.T) {
	h := http.Header{
		"Authorization":     {"Bearer sk-secret"},
		"X-Api-Key":         {"sk-ant-secret"},
		"Cookie":            {"s=1"},
		"Anthropic-Version": {"2023-06-01"},
		"Content-Type":      {"application/json"},
	}
	out := model.RedactHeader(h)
	for _, k := range []string{"Authorization", "X-Api-Key", "Cookie"} {
		if out.Get(k) != "[redacted]" {
			t.Errorf("%s = %q", k, out.Get(k))
		}
	}
	if out.Get("Anthropic-Version") != "2023-06-01" || out.Get("Content-Type") != "application/json" {
		t.Errorf("harmless headers changed: %v", out)
	}
	if h.Get("Authorization") != "Bearer sk-secret" {
		t.Error("RedactHeader changed its input")
	}
}

func TestLogMiddleware(t *testing.T) {
	var buf bytes.Buffer
	logger := slogJSON(&buf)
	ok := model.Funcs{GenerateFunc: func(context.Context, llm.Request) (llm.Response, error) {
		return llm.Response{Message: llm.AssistantText("secret answer"), FinishReason: llm.FinishStop,
			Usage: llm.Usage{InputTokens: 10, OutputTokens: 3}, RequestID: "req_1"}, nil
	}}
	req := llm.Request{Model: "m1", Messages: []llm.Message{llm.UserText("private question")}}
	m := model.Log(logger)(ok)
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, _, err := drain(m.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	failing := model.Funcs{GenerateFunc: func(context.Context, llm.Request) (llm.Response, error) {
		return llm.Response{}, &model.Error{Kind: model.KindAuth, Status: 401, RequestID: "req_2",
			Message: "Incorrect API key provided: sk-proj-0123456789abcdef"}
	}}
	if _, err := model.Log(logger)(failing).Generate(context.Background(), req); err == nil {
		t.Fatal("error lost")
	}
	out := buf.String()
	for _, leak := range []string{"private question", "secret answer", "0123456789abcdef"} {
		if strings.Contains(out, leak) {
			t.Errorf("log leaks %q:\n%s", leak, out)
		}
	}
	var records []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		records = append(records, r)
	}
	if len(records) != 3 {
		t.Fatalf("%d records:\n%s", len(records), out)
	}
	for _, r := range records[:2] {
		if r["model"] != "m1" || r["finish"] != "stop" || r["input_tokens"] != 10.0 || r["messages"] != 1.0 {
			t.Errorf("success record: %v", r)
		}
	}
	if r := records[2]; r["level"] != "WARN" || r["kind"] != "auth" || r["status"] != 401.0 || r["request_id"] != "req_2" {
		t.Errorf("failure record: %v", r)
	}
}

func slogJSON(w *bytes.Buffer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }
