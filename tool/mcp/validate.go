package mcp

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

// argSchema is the resolved input schema of one tool of a server. A nil
// *argSchema, or one whose resolved is nil, validates nothing: the
// arguments are passed through for the server to check.
type argSchema struct {
	resolved *jsonschema.Resolved
	closed   bool // the schema refuses unknown top-level fields
	raw      string
}

// maxSchemaInMessage caps the schema quoted in a validation error result.
const maxSchemaInMessage = 4000

// resolveArgSchema resolves raw, the input schema a tool advertises. The
// error says why jsonschema-go cannot use it (a remote $ref, a pattern
// that is not RE2, a keyword of another shape than it knows).
func resolveArgSchema(raw json.RawMessage) (*argSchema, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, err
	}
	root := resolved.Schema()
	return &argSchema{
		resolved: resolved,
		closed:   isFalse(root.AdditionalProperties) && len(root.PatternProperties) == 0,
		raw:      string(raw),
	}, nil
}

// check validates the arguments, decoded as obj, and returns what is wrong
// with them, or "" when nothing is.
func (s *argSchema) check(obj map[string]any) string {
	if s == nil || s.resolved == nil {
		return ""
	}
	if msg := s.checkFields(obj); msg != "" {
		return msg
	}
	if err := s.resolved.Validate(obj); err != nil {
		return describeValidation(err)
	}
	return ""
}

// checkFields reports unknown and missing top-level fields together, which
// the validator would report one at a time: a misspelt field is both.
func (s *argSchema) checkFields(obj map[string]any) string {
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

// invalid is the message of an error result for arguments of the tool
// named name that break the schema; the schema is quoted, cut to
// maxSchemaInMessage bytes.
func (s *argSchema) invalid(name, what string) string {
	schema := s.raw
	if len(schema) > maxSchemaInMessage {
		cut := maxSchemaInMessage
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
