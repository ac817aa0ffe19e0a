package tool_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loomkit/loom/tool"
)

const nestedSchema = `{"type":"object","properties":{"path":{"type":"string"},"items":{"type":"array","items":{"type":"object","properties":{"n":{"type":"integer","minimum":1}}}}},"required":["path"],"additionalProperties":false}`

func TestSchemaCheck(t *testing.T) {
	s, err := tool.NewSchema(json.RawMessage(nestedSchema))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Closed() {
		t.Error("additionalProperties false not seen")
	}
	if got := string(s.JSON()); got != nestedSchema {
		t.Errorf("JSON() = %s, want the raw text given", got)
	}
	for _, c := range []struct {
		args map[string]any
		want []string // substrings of the message; none: valid
	}{
		{map[string]any{"path": "a"}, nil},
		{map[string]any{"path": "a", "items": []any{map[string]any{"n": float64(2)}}}, nil},
		// A misspelt field is both unknown and missing, said at once.
		{map[string]any{"pth": "a"}, []string{`unknown field "pth" (the fields are: items, path)`, `missing required field "path"`}},
		{map[string]any{"path": float64(1)}, []string{"at path: ", "type"}},
		{map[string]any{"path": "a", "items": []any{map[string]any{"n": float64(0)}}}, []string{"at items[].n: ", "minimum"}},
	} {
		msg := s.Check(c.args)
		if c.want == nil {
			if msg != "" {
				t.Errorf("%v: refused: %s", c.args, msg)
			}
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: %q does not contain %q", c.args, msg, w)
			}
		}
	}
	var none *tool.Schema
	if msg := none.Check(map[string]any{"anything": 1}); msg != "" {
		t.Errorf("nil Schema refused arguments: %s", msg)
	}
	if none.Closed() || none.JSON() != nil {
		t.Error("nil Schema is closed or has JSON")
	}
}

func TestSchemaPatternPropertiesAreNotUnknown(t *testing.T) {
	s, err := tool.NewSchema(json.RawMessage(`{"type":"object","properties":{"a":{}},"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Closed() {
		t.Error("a schema with patternProperties reported closed")
	}
	if msg := s.Check(map[string]any{"a": 1, "x-b": "c"}); msg != "" {
		t.Errorf("a pattern property refused: %s", msg)
	}
	if msg := s.Check(map[string]any{"a": 1, "y": "c"}); msg == "" {
		t.Error("a field matching neither a property nor a pattern accepted")
	}
}

func TestNewSchemaRefuses(t *testing.T) {
	for _, bad := range []string{
		`not json`,
		`{"type":"object","properties":{"x":{"$ref":"https://example.com/x.json"}}}`,
		`{"type":"object","properties":{"x":{"type":"string","pattern":"(?<=a)b"}}}`,
		`{"type":"object","properties":{"x":{"type":5}}}`,
	} {
		if s, err := tool.NewSchema(json.RawMessage(bad)); err == nil {
			t.Errorf("%s: resolved (%+v), want an error", bad, s)
		}
	}
	if _, err := tool.NewSchemaOf(nil); err == nil {
		t.Error("NewSchemaOf(nil): no error")
	}
	_, err := tool.NewSchemaOf(&jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"x": {Pattern: "(?<=a)b"}}})
	if err == nil || !strings.Contains(err.Error(), "resolving the arguments' schema") {
		t.Errorf("NewSchemaOf with a bad pattern: %v", err)
	}
}

func TestSchemaInvalid(t *testing.T) {
	s, err := tool.NewSchemaOf(&jsonschema.Schema{Type: "object"})
	if err != nil {
		t.Fatal(err)
	}
	got := s.Invalid("ls", `missing required field "path"`)
	want := `Invalid arguments for ls: missing required field "path". The tool was not run. Call it again with arguments matching this JSON Schema: {"type":"object"}`
	if got != want {
		t.Errorf("Invalid:\n got %s\nwant %s", got, want)
	}

	// A long schema is cut at a rune boundary, never inside a rune.
	desc := strings.Repeat("é", tool.MaxSchemaInMessage)
	big, err := tool.NewSchema(json.RawMessage(`{"type":"object","description":"` + desc + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	got = big.Invalid("ls", "x")
	quoted := got[strings.Index(got, "JSON Schema: ")+len("JSON Schema: "):]
	if !strings.HasSuffix(quoted, "...") || len(quoted) > tool.MaxSchemaInMessage+len("...") || len(quoted) < tool.MaxSchemaInMessage-utf8.UTFMax {
		t.Errorf("quoted schema is %d bytes, ends %q", len(quoted), quoted[len(quoted)-10:])
	}
	if !utf8.ValidString(got) {
		t.Error("cut schema is not valid UTF-8")
	}
}
