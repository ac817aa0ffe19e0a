package loomtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
)

func TestReadScript(t *testing.T) {
	cfg, err := loomtest.ReadScript(strings.NewReader(`{
		"repeat": true,
		"turns": [
			{"thinking": "hmm", "signature": "s", "text": "reading",
			 "tool_calls": [{"id": "c1", "name": "read", "arguments": {"path": "a.go"}}, {"name": "bad", "arguments": "{\"a\":"}],
			 "usage": {"input_tokens": 3}, "chunk": 2},
			{"status": 429, "headers": {"retry-after": "2"}, "error": {"type": "rate_limit_error", "message": "slow"}},
			{"text": "cut", "cut": "silence", "cut_after": 2, "ping_every": "100ms", "header_delay": "1s"}
		],
		"anthropic": [{"parts": [{"type": "text", "text": "only anthropic"}]}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Repeat || len(cfg.Turns) != 3 || len(cfg.Anthropic) != 1 || cfg.OpenAI != nil {
		t.Fatalf("%+v", cfg)
	}
	t0 := cfg.Turns[0]
	want := []llm.Part{
		llm.Thinking{Text: "hmm", Signature: "s"},
		llm.Text{Text: "reading"},
		llm.ToolCall{ID: "c1", Name: "read", Arguments: `{"path": "a.go"}`},
		llm.ToolCall{Name: "bad", Arguments: `{"a":`},
	}
	if len(t0.Parts) != len(want) {
		t.Fatalf("parts %+v", t0.Parts)
	}
	for i := range want {
		if t0.Parts[i] != want[i] {
			t.Fatalf("part %d = %#v, want %#v", i, t0.Parts[i], want[i])
		}
	}
	if t0.Usage.InputTokens != 3 || t0.Chunk != 2 {
		t.Fatalf("turn 0 %+v", t0)
	}
	t1 := cfg.Turns[1]
	if t1.Status != 429 || t1.Header.Get("Retry-After") != "2" || t1.Error.Type != "rate_limit_error" {
		t.Fatalf("turn 1 %+v", t1)
	}
	t2 := cfg.Turns[2]
	if t2.Cut != loomtest.CutSilence || t2.CutAfter != 2 || t2.PingEvery != 100*time.Millisecond || t2.HeaderDelay != time.Second {
		t.Fatalf("turn 2 %+v", t2)
	}
	if cfg.Anthropic[0].Parts[0] != (llm.Text{Text: "only anthropic"}) {
		t.Fatalf("anthropic %+v", cfg.Anthropic)
	}
}

func TestReadScriptRefusesMistakes(t *testing.T) {
	for _, bad := range []string{
		`{"turns": [{"txt": "typo"}]}`,
		`{"turns": [{"cut": "sideways"}]}`,
		`{"turns": [{"header_delay": 5}]}`,
		`{"turns": [{"parts": [{"type": "video"}]}]}`,
		`{"turns": [`,
	} {
		if _, err := loomtest.ReadScript(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "loomtest") {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}
