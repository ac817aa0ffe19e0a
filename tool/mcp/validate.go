package mcp

import (
	"encoding/json"

	"github.com/loomkit/loom/tool"
)

// argSchema is the resolved input schema of one tool of a server, checked
// with [tool.Schema]. A nil *argSchema validates nothing: the arguments are
// passed through for the server to check.
type argSchema struct {
	schema *tool.Schema
	closed bool // the schema refuses unknown top-level fields
}

// maxSchemaInMessage caps the schema quoted in a validation error result.
const maxSchemaInMessage = tool.MaxSchemaInMessage

// resolveArgSchema resolves raw, the input schema a tool advertises. The
// error says why jsonschema-go cannot use it (a remote $ref, a pattern
// that is not RE2, a keyword of another shape than it knows).
func resolveArgSchema(raw json.RawMessage) (*argSchema, error) {
	s, err := tool.NewSchema(raw)
	if err != nil {
		return nil, err
	}
	return &argSchema{schema: s, closed: s.Closed()}, nil
}

// check validates the arguments, decoded as obj, and returns what is wrong
// with them, or "" when nothing is.
func (s *argSchema) check(obj map[string]any) string {
	if s == nil {
		return ""
	}
	return s.schema.Check(obj)
}

// invalid is the message of an error result for arguments of the tool
// named name that break the schema; the schema is quoted, cut to
// maxSchemaInMessage bytes.
func (s *argSchema) invalid(name, what string) string {
	return s.schema.Invalid(name, what)
}
