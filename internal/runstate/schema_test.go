// Package runstate_test pins loom's published run-state format
// (docs/run-state.md, docs/schema): the JSON Schemas, the format 1
// fixtures every later loom must keep reading, and the examples of the
// document. The package holds tests only.
package runstate_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// The schema files, by the name the tests use.
const (
	schemaLLM      = "llm.v1.schema.json"
	schemaSnapshot = "run-snapshot.v1.schema.json"
	schemaEnvelope = "journal-envelope.v1.schema.json"
	schemaRecord   = "journal-record.v1.schema.json"
	schemaAgent    = "agent-snapshot.v1.schema.json"
)

// schemaBase is the URI prefix of every schema's $id.
const schemaBase = "https://github.com/loomkit/loom/raw/main/docs/schema/"

var (
	docsDir   = filepath.Join("..", "..", "docs")
	schemaDir = filepath.Join(docsDir, "schema")
)

var schemas struct {
	once     sync.Once
	err      error
	resolved map[string]*jsonschema.Resolved
}

// readSchema reads a schema file strictly: it must be one JSON object
// whose $id names the file.
func readSchema(name string) (*jsonschema.Schema, error) {
	data, err := os.ReadFile(filepath.Join(schemaDir, name))
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if want := schemaBase + name; s.ID != want {
		return nil, fmt.Errorf("%s: $id is %q, want %q", name, s.ID, want)
	}
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" {
		return nil, fmt.Errorf("%s: $schema is %q, want draft 2020-12", name, s.Schema)
	}
	return &s, nil
}

// loader resolves references between the schema files by their $id,
// without the network: only ids under schemaBase are known.
func loader(u *url.URL) (*jsonschema.Schema, error) {
	s := u.String()
	if !strings.HasPrefix(s, schemaBase) || strings.Contains(strings.TrimPrefix(s, schemaBase), "/") {
		return nil, fmt.Errorf("reference to %s, which is not one of loom's schema files", s)
	}
	return readSchema(path.Base(u.Path))
}

// resolvedSchema returns the resolved schema of a file.
func resolvedSchema(t testing.TB, name string) *jsonschema.Resolved {
	t.Helper()
	schemas.once.Do(func() {
		schemas.resolved = map[string]*jsonschema.Resolved{}
		for _, n := range []string{schemaLLM, schemaSnapshot, schemaEnvelope, schemaRecord, schemaAgent} {
			s, err := readSchema(n)
			if err != nil {
				schemas.err = err
				return
			}
			rs, err := s.Resolve(&jsonschema.ResolveOptions{Loader: loader})
			if err != nil {
				schemas.err = fmt.Errorf("resolve %s: %w", n, err)
				return
			}
			schemas.resolved[n] = rs
		}
	})
	if schemas.err != nil {
		t.Fatal(schemas.err)
	}
	rs, ok := schemas.resolved[name]
	if !ok {
		t.Fatalf("no schema %s", name)
	}
	return rs
}

// validate checks one JSON document against a schema file. The document
// is decoded into an any, as JSON Schema sees it (numbers as float64,
// which is exact for every integer loom writes).
func validate(t testing.TB, name string, doc []byte) error {
	t.Helper()
	rs := resolvedSchema(t, name)
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return rs.Validate(fromNumbers(v))
}

// fromNumbers turns json.Numbers into float64, or int64 where that is
// exact, so that integer checks see integers.
func fromNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return float64(i)
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = fromNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = fromNumbers(x[k])
		}
	}
	return v
}

// Every schema file is draft 2020-12, resolves with the others, uses no
// keyword this validator does not know (a misspelt keyword would be
// silently ignored by every validator), and every object it describes
// refuses undeclared members.
func TestSchemasAreWellFormed(t *testing.T) {
	entries, err := os.ReadDir(schemaDir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	want := []string{schemaAgent, schemaEnvelope, schemaRecord, schemaLLM, schemaSnapshot}
	sort.Strings(want)
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Fatalf("docs/schema holds %v, want %v (add new files to the tests)", files, want)
	}
	for _, name := range files {
		resolvedSchema(t, name)
		s, err := readSchema(name)
		if err != nil {
			t.Fatal(err)
		}
		walkSchema(s, "#", func(at string, s *jsonschema.Schema) {
			if len(s.Extra) > 0 {
				keys := make([]string, 0, len(s.Extra))
				for k := range s.Extra {
					keys = append(keys, k)
				}
				t.Errorf("%s%s: unknown keywords %v", name, at, keys)
			}
			if s.Type == "object" && len(s.Properties) > 0 && s.AdditionalProperties == nil && !openObjects[name+at] {
				t.Errorf("%s%s: declares properties but does not refuse others (additionalProperties)", name, at)
			}
		})
	}
}

// openObjects are the object schemas whose other members are checked
// elsewhere: a tagged union's tag (each branch closes the object), and
// the store's partial view of a payload.
var openObjects = map[string]bool{
	"llm.v1.schema.json#/$defs/part":                        true,
	"journal-envelope.v1.schema.json#/$defs/run_header":     true,
	"journal-record.v1.schema.json#/$defs/resolution_value": true,
}

// walkSchema calls f on s and on every subschema in it, with its
// location as a JSON pointer.
func walkSchema(s *jsonschema.Schema, at string, f func(string, *jsonschema.Schema)) {
	if s == nil {
		return
	}
	f(at, s)
	for _, m := range []struct {
		name string
		m    map[string]*jsonschema.Schema
	}{{"$defs", s.Defs}, {"properties", s.Properties}, {"patternProperties", s.PatternProperties}, {"dependentSchemas", s.DependentSchemas}} {
		for k, x := range m.m {
			walkSchema(x, at+"/"+m.name+"/"+k, f)
		}
	}
	for _, l := range []struct {
		name string
		l    []*jsonschema.Schema
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}, {"prefixItems", s.PrefixItems}} {
		for i, x := range l.l {
			walkSchema(x, fmt.Sprintf("%s/%s/%d", at, l.name, i), f)
		}
	}
	for _, x := range []struct {
		name string
		s    *jsonschema.Schema
	}{{"items", s.Items}, {"additionalProperties", s.AdditionalProperties}, {"unevaluatedProperties", s.UnevaluatedProperties},
		{"propertyNames", s.PropertyNames}, {"contains", s.Contains}, {"not", s.Not}, {"if", s.If}, {"then", s.Then}, {"else", s.Else}} {
		walkSchema(x.s, at+"/"+x.name, f)
	}
}
