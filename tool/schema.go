package tool

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// MaxSchemaInMessage caps, in bytes, the schema quoted by [Schema.Invalid];
// a longer one is cut at a rune boundary and ends in "...".
const MaxSchemaInMessage = 4000

// Schema is the JSON Schema of a tool's arguments, resolved once so that
// each call's arguments are checked without resolving it again. [Func]
// tools and the tools of MCP servers check their arguments with it; any
// tool that advertises a schema can.
//
// A Schema is immutable and safe for concurrent use. A nil *Schema checks
// nothing: every argument object passes [Schema.Check].
type Schema struct {
	resolved *jsonschema.Resolved
	closed   bool // the schema refuses unknown top-level fields
	raw      string
}

// NewSchema resolves raw, the JSON text of an arguments schema. The error
// says why it cannot be used: it is not a schema, or jsonschema-go cannot
// resolve it (a remote $ref, a pattern that is not RE2, a keyword of
// another shape than it knows). [Schema.Invalid] quotes raw as it is.
func NewSchema(raw json.RawMessage) (*Schema, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return resolveSchema(&s, string(raw))
}

// NewSchemaOf resolves s, an arguments schema built in Go (by
// jsonschema.For, say). s must not be modified afterwards.
// [Schema.JSON] is its JSON encoding.
func NewSchemaOf(s *jsonschema.Schema) (*Schema, error) {
	if s == nil {
		return nil, fmt.Errorf("nil schema: pass a *jsonschema.Schema")
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding the arguments' schema: %w", err)
	}
	schema, err := resolveSchema(s, string(raw))
	if err != nil {
		return nil, fmt.Errorf("resolving the arguments' schema: %w", err)
	}
	return schema, nil
}

func resolveSchema(s *jsonschema.Schema, raw string) (*Schema, error) {
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, err
	}
	root := resolved.Schema()
	return &Schema{
		resolved: resolved,
		closed:   isFalse(root.AdditionalProperties) && len(root.PatternProperties) == 0,
		raw:      raw,
	}, nil
}

// JSON returns the schema's JSON text: the raw text given to [NewSchema],
// or the encoding made by [NewSchemaOf]. It is nil for a nil *Schema.
func (s *Schema) JSON() json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(s.raw)
}

// Closed reports whether the schema refuses top-level fields that are not
// among its properties: its additionalProperties is false and it has no
// patternProperties. [Schema.Check] names such fields as unknown. It is
// false for a nil *Schema.
func (s *Schema) Closed() bool { return s != nil && s.closed }

// Check checks args, a call's arguments decoded as a JSON object, and
// returns what is wrong with them for the model to read, naming the field
// and the rule broken ("at a[].b: type: ..."), or "" when they are valid.
// Unknown and missing top-level fields are reported together, so that a
// misspelt field is named as both.
func (s *Schema) Check(args map[string]any) string {
	if s == nil || s.resolved == nil {
		return ""
	}
	if msg := s.checkFields(args); msg != "" {
		return msg
	}
	if err := s.resolved.Validate(args); err != nil {
		return describeValidation(err)
	}
	return ""
}

// checkFields reports unknown and missing top-level fields together, which
// the validator would report one at a time: a misspelt field is both.
func (s *Schema) checkFields(obj map[string]any) string {
	root := s.resolved.Schema()
	var unknown, missing []string
	if s.closed {
		for k := range obj {
			if _, ok := root.Properties[k]; !ok {
				unknown = append(unknown, strconv.Quote(k))
			}
		}
	}
	for _, r := range root.Required {
		if _, ok := obj[r]; !ok {
			missing = append(missing, strconv.Quote(r))
		}
	}
	if len(unknown) == 0 && len(missing) == 0 {
		return ""
	}
	slices.Sort(unknown)
	var parts []string
	if len(unknown) > 0 {
		known := slices.Sorted(maps.Keys(root.Properties))
		parts = append(parts, fmt.Sprintf("unknown field %s (the fields are: %s)", strings.Join(unknown, ", "), strings.Join(known, ", ")))
	}
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("missing required field %s", strings.Join(missing, ", ")))
	}
	return strings.Join(parts, "; ")
}

// Invalid returns the content of the error result for a call of the tool
// named name whose arguments are wrong as what says (a [Schema.Check]
// message, say): it tells the model the tool was not run and quotes the
// schema, cut to [MaxSchemaInMessage] bytes, to call it again with.
func (s *Schema) Invalid(name, what string) string {
	schema := string(s.JSON())
	if len(schema) > MaxSchemaInMessage {
		cut := MaxSchemaInMessage
		for cut > 0 && !utf8.RuneStart(schema[cut]) {
			cut--
		}
		schema = schema[:cut] + "..."
	}
	return fmt.Sprintf("Invalid arguments for %s: %s. The tool was not run. Call it again with arguments matching this JSON Schema: %s", name, what, schema)
}

// isFalse reports whether s is the schema false (which jsonschema-go
// writes as {"not": {}}).
func isFalse(s *jsonschema.Schema) bool {
	if s == nil || s.Not == nil {
		return false
	}
	b, err := json.Marshal(s)
	return err == nil && string(b) == "false"
}

// describeValidation turns jsonschema-go's "validating root: validating
// /properties/a/items/properties/b: type: ..." into "at a[].b: type: ...".
func describeValidation(err error) string {
	msg := err.Error()
	at := ""
	for strings.HasPrefix(msg, "validating ") {
		rest := msg[len("validating "):]
		i := strings.Index(rest, ": ")
		if i < 0 {
			break
		}
		at, msg = rest[:i], rest[i+2:]
	}
	field := fieldPath(at)
	if field == "" {
		return msg
	}
	return "at " + field + ": " + msg
}

// fieldPath turns a schema pointer into a readable path to the field:
// /properties/a/items/properties/b becomes a[].b; the root is "".
func fieldPath(ptr string) string {
	if ptr == "" || ptr == "root" || !strings.HasPrefix(ptr, "/") {
		return ""
	}
	segs := strings.Split(ptr[1:], "/")
	var b strings.Builder
	for i := 0; i < len(segs); i++ {
		switch segs[i] {
		case "properties":
			if i+1 < len(segs) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(strings.ReplaceAll(strings.ReplaceAll(segs[i+1], "~1", "/"), "~0", "~"))
				i++
			}
		case "items", "prefixItems":
			b.WriteString("[]")
		case "additionalProperties":
			b.WriteString(".*")
		}
	}
	return b.String()
}
