package anthropic

import (
	"errors"
	"strings"
	"testing"
)

func TestFitSchema(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"already in the subset", `{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"number"}},"required":["city","celsius"],"additionalProperties":false}`,
			`{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"number"}},"required":["city","celsius"],"additionalProperties":false}`},
		{"the order of the properties is kept", `{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"string"},"m":{"type":"string"}}}`,
			`{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"string"},"m":{"type":"string"}},"additionalProperties":false}`},
		{"objects are closed, nested too", `{"type":"object","properties":{"in":{"type":["null","object"],"properties":{"x":{"type":"integer"}}}}}`,
			`{"type":"object","properties":{"in":{"type":["null","object"],"properties":{"x":{"type":"integer"}},"additionalProperties":false}},"additionalProperties":false}`},
		{"bounds move into the description", `{"type":"object","properties":{"age":{"type":"integer","description":"in years","minimum":0,"maximum":150},"name":{"type":"string","minLength":1,"maxLength":20,"pattern":"^[a-z]+$"}}}`,
			`{"type":"object","properties":{"age":{"type":"integer","description":"in years (minimum: 0, maximum: 150)"},"name":{"type":"string","description":"(minLength: 1, maxLength: 20, pattern: \"^[a-z]+$\")"}},"additionalProperties":false}`},
		{"minItems 0 or 1 stays, more is told", `{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3}`,
			`{"type":"array","items":{"type":"string"},"minItems":1,"description":"(maxItems: 3)"}`},
		{"minItems 2 is told", `{"type":"array","items":{"type":"string"},"minItems":2}`,
			`{"type":"array","items":{"type":"string"},"description":"(minItems: 2)"}`},
		{"formats the API takes stay", `{"type":"object","properties":{"d":{"type":"string","format":"date"},"r":{"type":"string","format":"regex"}}}`,
			`{"type":"object","properties":{"d":{"type":"string","format":"date"},"r":{"type":"string","description":"(format: \"regex\")"}},"additionalProperties":false}`},
		{"oneOf becomes anyOf", `{"oneOf":[{"type":"string"},{"type":"object","properties":{"n":{"type":"number"}}}]}`,
			`{"anyOf":[{"type":"string"},{"type":"object","properties":{"n":{"type":"number"}},"additionalProperties":false}]}`},
		{"local references stay", `{"$defs":{"p":{"type":"object","properties":{"x":{"type":"number"}}}},"type":"object","properties":{"a":{"$ref":"#/$defs/p"},"b":{"$ref":"#/$defs/p"}}}`,
			`{"$defs":{"p":{"type":"object","properties":{"x":{"type":"number"}},"additionalProperties":false}},"type":"object","properties":{"a":{"$ref":"#/$defs/p"},"b":{"$ref":"#/$defs/p"}},"additionalProperties":false}`},
		{"the true schema is any value", `{"type":"object","properties":{"v":true,"w":{}}}`,
			`{"type":"object","properties":{"v":{},"w":{}},"additionalProperties":false}`},
		{"meta keywords are dropped", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","$comment":"c","type":"string","enum":["a","b",null]}`,
			`{"type":"string","enum":["a","b",null]}`},
	}
	for _, c := range cases {
		got, err := fitSchema([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", c.name, got, err, c.want)
		}
	}
}

// A schema whose meaning the subset cannot hold is not rewritten into a
// different one: fitSchema says why, and the field is left out.
func TestFitSchemaRefusesWhatItCannotHold(t *testing.T) {
	cases := []struct {
		name, in, why string
	}{
		{"a map", `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"integer"}}}}`, "open object"},
		{"an open object", `{"type":"object","additionalProperties":true}`, "open object"},
		{"pattern properties", `{"type":"object","patternProperties":{"^x":{"type":"string"}}}`, "patternProperties"},
		{"recursion through a definition", `{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`, "recursive"},
		{"recursion through the root", `{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}}}`, "recursive"},
		{"mutual recursion", `{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"}]},"b":{"type":"array","items":{"$ref":"#/$defs/a"}}},"$ref":"#/$defs/a"}`, "recursive"},
		{"an external reference", `{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json"}}}`, "external"},
		{"a dangling reference", `{"$ref":"#/$defs/none"}`, "no definition"},
		{"an enum of objects", `{"enum":[{"a":1},"b"]}`, "enum of objects"},
		{"not", `{"not":{"type":"string"}}`, "not is not supported"},
		{"the false schema", `{"type":"object","properties":{"never":false}}`, "schema false"},
		{"tuple items", `{"type":"array","items":[{"type":"string"}]}`, "not an object"},
		{"if then else", `{"if":{"type":"string"},"then":{"minLength":1}}`, "if is not supported"},
	}
	for _, c := range cases {
		got, err := fitSchema([]byte(c.in))
		if !errors.Is(err, errSchemaUnfit) || !strings.Contains(err.Error(), c.why) || got != nil {
			t.Errorf("%s: %s, %v; want it refused because of %q", c.name, got, err, c.why)
		}
	}
	for _, bad := range []string{`{"type":`, `{}{}`, `[1]`, `"s"`} {
		if _, err := fitSchema([]byte(bad)); err == nil || errors.Is(err, errSchemaUnfit) {
			t.Errorf("%s: %v; want a decoding error", bad, err)
		}
	}
}

func FuzzFitSchema(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"type":"integer","minimum":1}}}`)
	f.Add(`{"$defs":{"n":{"properties":{"n":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`)
	f.Add(`{"anyOf":[{"enum":[1,"x"]},{"items":{"format":"date"}}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		got, err := fitSchema([]byte(in))
		if err != nil {
			return
		}
		// What is sent is itself in the subset: fitting it again changes nothing.
		again, err := fitSchema(got)
		if err != nil || string(again) != string(got) {
			t.Fatalf("fit of %s is %s; fitting that gives %s, %v", in, got, again, err)
		}
	})
}

// The rewrite of a typical output schema (nested objects, bounds), done
// once per schema and model: later requests take it from the cache.
func BenchmarkFitSchema(b *testing.B) {
	raw := []byte(`{"type":"object","properties":{"city":{"type":"string","minLength":1},"days":{"type":"array","maxItems":7,"items":{"type":"object","properties":{"date":{"type":"string","format":"date"},"celsius":{"type":"number","minimum":-90,"maximum":60},"rain":{"type":["null","boolean"]}},"required":["date","celsius"]}}},"required":["city","days"]}`)
	m := New(Config{APIKey: "k", Model: "m"})
	b.Run("rewrite", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := fitSchema(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.fitSchema(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
