package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Anthropic's structured outputs take a subset of JSON Schema: every
// object closed (additionalProperties false), no numeric, string or array
// bounds beyond minItems 0 or 1, a fixed list of string formats, enums of
// scalars, no recursion and no external $ref; anything else is a 400. The
// schema sent is therefore a rewrite of the caller's: the bounds it cannot
// take move into the description, where the model still reads them, and
// the caller validates the answer against the original schema (the agent
// does). A schema whose meaning the subset cannot hold (a map, an open
// object, a recursive type, a complex enum) is not sent at all: a closed
// object would force the model to answer {} for a map, which is worse
// than no constraint.

// schemaKeep are the keywords sent as they are (after their subschemas
// are rewritten).
var schemaKeep = []string{
	"type", "properties", "required", "items", "enum", "const", "anyOf", "allOf",
	"$ref", "$defs", "definitions", "description", "title", "default", "additionalProperties",
}

// schemaDescribe are the bounds left out and told in the description.
var schemaDescribe = []string{
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
	"minLength", "maxLength", "pattern", "maxItems", "uniqueItems", "minProperties", "maxProperties",
	"minContains", "maxContains", "examples",
}

// schemaFormats are the string formats the API takes.
var schemaFormats = []string{"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}

// fitSchema is [fitSchema] remembered per model (a run sends the same
// schema with every request); a schema left out is remembered as nil. A
// schema that does not decode is not remembered: it fails the request.
func (m *Model) fitSchema(raw []byte) ([]byte, error) {
	if v, ok := m.schemas.Get(raw); ok {
		if v == nil {
			return nil, errSchemaUnfit
		}
		return v, nil
	}
	fit, err := fitSchema(raw)
	switch {
	case err == nil:
		m.schemas.Put(raw, fit)
	case errors.Is(err, errSchemaUnfit):
		m.schemas.Put(raw, nil)
	}
	return fit, err
}

// errSchemaUnfit says the schema cannot be sent in the API's subset.
var errSchemaUnfit = errors.New("outside the subset")

// fitSchema returns raw rewritten into the subset the API takes, or an
// error wrapping errSchemaUnfit (with the reason) when its meaning does
// not fit there, or a decoding error when raw is not one JSON object. The
// order of the keys, and so of the properties the model writes, is kept.
func fitSchema(raw []byte) ([]byte, error) {
	v, err := decodeOrdered(raw)
	if err != nil {
		return nil, err
	}
	root, ok := v.(*object)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	if err := checkRefs(root); err != nil {
		return nil, err
	}
	fit, err := fitNode(root, "#")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	encodeOrdered(&b, fit)
	return b.Bytes(), nil
}

func unfit(where, format string, a ...any) error {
	return fmt.Errorf("%w at %s: %s", errSchemaUnfit, where, fmt.Sprintf(format, a...))
}

// fitNode rewrites one schema.
func fitNode(n *object, where string) (*object, error) {
	out := &object{}
	var told []string
	isObject := n.has("properties")
	for _, k := range n.keys {
		v := n.vals[k]
		switch {
		case k == "type":
			if v == "object" || (isArray(v) && slices.Contains(v.([]any), any("object"))) {
				isObject = true
			}
			out.set(k, v)
		case k == "properties" || k == "$defs" || k == "definitions":
			m, ok := v.(*object)
			if !ok {
				return nil, unfit(where, "%s is not an object", k)
			}
			sub := &object{}
			for _, name := range m.keys {
				s, err := subschema(m.vals[name], where+"/"+k+"/"+name)
				if err != nil {
					return nil, err
				}
				sub.set(name, s)
			}
			out.set(k, sub)
		case k == "items" || k == "not":
			if k == "not" {
				return nil, unfit(where, "not is not supported")
			}
			s, err := subschema(v, where+"/items")
			if err != nil {
				return nil, err
			}
			out.set(k, s)
		case k == "anyOf" || k == "allOf" || k == "oneOf":
			list, ok := v.([]any)
			if !ok {
				return nil, unfit(where, "%s is not an array", k)
			}
			var subs []any
			for i, e := range list {
				s, err := subschema(e, fmt.Sprintf("%s/%s/%d", where, k, i))
				if err != nil {
					return nil, err
				}
				subs = append(subs, s)
			}
			if k == "oneOf" { // the answer is validated against oneOf itself
				k = "anyOf"
			}
			out.set(k, subs)
		case k == "additionalProperties":
			if v != false {
				return nil, unfit(where, "an open object (additionalProperties %s); the API takes only closed ones", compact(v))
			}
		case k == "enum":
			list, _ := v.([]any)
			for _, e := range list {
				if _, complex := e.(*object); complex || isArray(e) {
					return nil, unfit(where, "an enum of objects or arrays")
				}
			}
			out.set(k, v)
		case k == "minItems":
			if f, ok := v.(json.Number); ok && (f == "0" || f == "1") {
				out.set(k, v)
			} else {
				told = append(told, k+": "+compact(v))
			}
		case k == "format":
			if s, ok := v.(string); ok && slices.Contains(schemaFormats, s) {
				out.set(k, v)
			} else {
				told = append(told, k+": "+compact(v))
			}
		case k == "patternProperties" || k == "propertyNames" || k == "dependentSchemas" ||
			k == "if" || k == "then" || k == "else" || k == "prefixItems" || k == "contains" ||
			k == "unevaluatedProperties" || k == "unevaluatedItems":
			return nil, unfit(where, "%s is not supported", k)
		case slices.Contains(schemaKeep, k):
			out.set(k, v)
		case slices.Contains(schemaDescribe, k):
			told = append(told, k+": "+compact(v))
		}
	}
	if isObject {
		out.set("additionalProperties", false)
	}
	if len(told) > 0 {
		d, _ := out.vals["description"].(string)
		note := "(" + strings.Join(told, ", ") + ")"
		if d != "" {
			note = d + " " + note
		}
		out.set("description", note)
	}
	return out, nil
}

func subschema(v any, where string) (any, error) {
	switch v := v.(type) {
	case *object:
		return fitNode(v, where)
	case bool: // true: anything, as {} says; false: nothing, which the API cannot say
		if v {
			return &object{}, nil
		}
		return nil, unfit(where, "the schema false")
	}
	return nil, unfit(where, "a schema that is not an object")
}

// checkRefs refuses external references and recursion: a $ref that is
// not local, or a chain of local ones that comes back to itself.
func checkRefs(root *object) error {
	defs := map[string]*object{}
	for _, k := range []string{"$defs", "definitions"} {
		if m, ok := root.vals[k].(*object); ok {
			for _, name := range m.keys {
				if d, ok := m.vals[name].(*object); ok {
					defs["#/"+k+"/"+name] = d
				}
			}
		}
	}
	var err error
	state := map[*object]int{} // 1: on the path; 2: done
	var visit func(n *object)
	visit = func(n *object) {
		if err != nil || state[n] == 2 {
			return
		}
		state[n] = 1
		walk(n, func(ref string) {
			if err != nil {
				return
			}
			target, ok := defs[ref]
			switch {
			case ref == "#":
				target, ok = root, true
			case !strings.HasPrefix(ref, "#"):
				err = unfit("$ref", "an external reference %q", ref)
				return
			case !ok:
				err = unfit("$ref", "a reference %q to no definition", ref)
				return
			}
			if state[target] == 1 {
				err = unfit("$ref", "a recursive schema (through %q)", ref)
				return
			}
			visit(target)
		})
		state[n] = 2
	}
	visit(root)
	return err
}

// walk calls f with every $ref inside n, not entering $defs (each
// definition is visited when it is referred to).
func walk(n *object, f func(ref string)) {
	for _, k := range n.keys {
		if k == "$defs" || k == "definitions" {
			continue
		}
		if k == "$ref" {
			if s, ok := n.vals[k].(string); ok {
				f(s)
			}
			continue
		}
		walkValue(n.vals[k], f)
	}
}

func walkValue(v any, f func(ref string)) {
	switch v := v.(type) {
	case *object:
		walk(v, f)
	case []any:
		for _, e := range v {
			walkValue(e, f)
		}
	}
}

func isArray(v any) bool { _, ok := v.([]any); return ok }

func compact(v any) string {
	var b bytes.Buffer
	encodeOrdered(&b, v)
	return b.String()
}

// object is a JSON object that keeps the order of its keys.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) has(k string) bool { _, ok := o.vals[k]; return ok }

func (o *object) set(k string, v any) {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	if !o.has(k) {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// decodeOrdered decodes one JSON value, objects as *object, numbers as
// json.Number; trailing data is an error.
func decodeOrdered(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the schema")
	}
	return v, nil
}

func decodeValue(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			o.set(kt.(string), v)
		}
		_, err := d.Token()
		return o, err
	case json.Delim('['):
		list := []any{}
		for d.More() {
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := d.Token()
		return list, err
	}
	return t, nil
}

func encodeOrdered(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case *object:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			encodeOrdered(b, v.vals[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeOrdered(b, e)
		}
		b.WriteByte(']')
	default:
		vb, _ := json.Marshal(v)
		b.Write(vb)
	}
}
