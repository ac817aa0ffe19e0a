package openai

import (
	"testing"

	"github.com/loomkit/loom/llm"
)

// FuzzNormalizeArguments: the shortcut gives what llm.NormalizeArguments
// gives.
func FuzzNormalizeArguments(f *testing.F) {
	for _, s := range []string{"", "  ", "{}", ` {"a":1} `, `{"a":1}{"a":1}`, `{}{"b":2}`, `{"a":`, `[1]`, `"x"`, `{"a":1} x`,
		"{\"a\":\"\xff\"}", `{"a":1}{"a":2}`, "\t{\n}\n", `{"a":{"b":[1,2,{}]}}`, `{"a":1,}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, gok := normalizeArguments(raw)
		want, wok := llm.NormalizeArguments(raw)
		if got != want || gok != wok {
			t.Fatalf("normalizeArguments(%q) = %q, %v; llm.NormalizeArguments gives %q, %v", raw, got, gok, want, wok)
		}
	})
}
