package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loomkit/loom/llm"
)

// FuncOptions configures a [Func] tool. The zero value (or nil) gives a
// destructive tool that needs no approval, whose results are cut at
// [DefaultMaxResult] bytes.
type FuncOptions[In any] struct {
	// Effect says what a call does to the world (see [llm.Effect]).
	Effect llm.Effect
	// NeedsApproval makes every call need a decision (it is the spec's
	// flag).
	NeedsApproval bool
	// ApprovalFor, when set, decides for the calls NeedsApproval leaves
	// free (see [Approvable]); it sees the validated, decoded arguments.
	// Calls whose arguments are invalid never run, and need no approval.
	ApprovalFor func(In) bool
	// MaxResult is the size in bytes above which results are cut to head
	// and tail (see [Truncate]): 0 means [DefaultMaxResult], a negative
	// value no limit. It counts the text only, not a result's images.
	MaxResult int
	// Schema, when set, replaces the schema inferred from In. It must be an
	// object schema that In's JSON decoding agrees with.
	Schema *jsonschema.Schema
}

// FuncTool is a tool made by [Func] or [NewFunc]. It is safe for concurrent
// use when its function is. It always implements [Approvable]; without
// FuncOptions.ApprovalFor its answer is the spec's NeedsApproval.
type FuncTool[In, Out any] struct {
	spec     llm.ToolSpec
	args     *Schema
	fn       func(context.Context, In) (Out, error)
	approval func(In) bool
	max      int
}

// Func returns a tool called name that runs fn. It panics where [NewFunc]
// returns an error: a bad name or an In whose schema cannot be inferred is
// a bug in the program, found the first time it runs.
func Func[In, Out any](name, description string, fn func(context.Context, In) (Out, error), opts *FuncOptions[In]) *FuncTool[In, Out] {
	t, err := NewFunc(name, description, fn, opts)
	if err != nil {
		panic(err)
	}
	return t
}

// NewFunc returns a tool called name that runs fn.
//
// The arguments' JSON Schema is inferred from In with jsonschema-go's For:
// In is a struct; its fields' JSON names are the properties; fields without
// omitempty or omitzero are required; a `jsonschema:"..."` tag is the
// property's description; unknown properties are refused. A call's
// arguments are validated against that schema and then decoded into In;
// when either fails, fn does not run and the result is an error naming the
// field and the rule broken, followed by the schema, so the model can
// correct itself.
//
// fn's error becomes an error result carrying its message; a panic in fn
// becomes an error result carrying the panic value. Out is the result's
// content: a string verbatim, anything else as JSON. An Out of type
// [llm.ToolResult] is the result itself, so a tool can return images (or
// fail without a Go error); its call id and name are the driver's to set.
// Content is valid UTF-8 and cut to opts.MaxResult; images are kept as they
// are.
func NewFunc[In, Out any](name, description string, fn func(context.Context, In) (Out, error), opts *FuncOptions[In]) (*FuncTool[In, Out], error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("tool %s: nil function", name)
	}
	if opts == nil {
		opts = &FuncOptions[In]{}
	}
	schema := opts.Schema
	if schema == nil {
		var err error
		schema, err = jsonschema.For[In](nil)
		if err != nil {
			return nil, fmt.Errorf("tool %s: inferring the arguments' schema: %w", name, err)
		}
	}
	if schema.Type != "object" {
		return nil, fmt.Errorf("tool %s: arguments must be a JSON object, so In must be a struct (or a map with string keys); its schema has type %q", name, schemaType(schema))
	}
	args, err := NewSchemaOf(schema)
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", name, err)
	}
	max := opts.MaxResult
	if max == 0 {
		max = DefaultMaxResult
	}
	return &FuncTool[In, Out]{
		spec: llm.ToolSpec{
			Name:          name,
			Description:   description,
			Schema:        args.JSON(),
			NeedsApproval: opts.NeedsApproval,
			Effect:        opts.Effect,
		},
		args:     args,
		fn:       fn,
		approval: opts.ApprovalFor,
		max:      max,
	}, nil
}

func schemaType(s *jsonschema.Schema) string {
	if s.Type != "" {
		return s.Type
	}
	return strings.Join(s.Types, "|")
}

// Spec returns the tool's spec. Its Schema is shared: do not modify it.
func (t *FuncTool[In, Out]) Spec() llm.ToolSpec { return t.spec }

// NeedsApproval implements [Approvable]: a call needs approval when the
// spec says every call does, or when FuncOptions.ApprovalFor says so for
// these (valid) arguments.
func (t *FuncTool[In, Out]) NeedsApproval(args json.RawMessage) bool {
	if t.spec.NeedsApproval || t.approval == nil {
		return t.spec.NeedsApproval
	}
	in, msg := t.decode(args)
	if msg != "" {
		return false
	}
	return t.approval(in)
}

// Call validates args, runs the function and returns its result. The Go
// error is always nil: every failure is an error result.
func (t *FuncTool[In, Out]) Call(ctx context.Context, args json.RawMessage) (res llm.ToolResult, err error) {
	in, msg := t.decode(args)
	if msg != "" {
		return ErrorResult(msg), nil
	}
	if err := ctx.Err(); err != nil {
		return ErrorResult(fmt.Sprintf("%s was not run: %v", t.spec.Name, context.Cause(ctx))), nil
	}
	out, ferr, panicked := t.run(ctx, in)
	if panicked != nil {
		return panicResult(t.spec.Name, panicked.v), nil
	}
	if ferr != nil {
		return ErrorResult(Truncate(ferr.Error(), t.max)), nil
	}
	var content string
	switch v := any(out).(type) {
	case string:
		content = v
	case llm.ToolResult:
		v.Content = validUTF8(Truncate(v.Content, t.max))
		return v, nil
	default:
		b, err := json.Marshal(out)
		if err != nil {
			return ErrorResult(fmt.Sprintf("%s ran, but its result could not be encoded as JSON: %v", t.spec.Name, err)), nil
		}
		content = string(b)
	}
	return TextResult(Truncate(content, t.max)), nil
}

type panicValue struct{ v any }

func (t *FuncTool[In, Out]) run(ctx context.Context, in In) (out Out, err error, p *panicValue) {
	defer func() {
		if v := recover(); v != nil {
			p = &panicValue{v}
		}
	}()
	out, err = t.fn(ctx, in)
	return out, err, nil
}

// decode validates args and decodes them into an In, or returns a message
// for the model saying what is wrong.
func (t *FuncTool[In, Out]) decode(args json.RawMessage) (In, string) {
	var in In
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return in, t.invalid(fmt.Sprintf("the arguments are not valid JSON (%v)", err))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return in, t.invalid(fmt.Sprintf("the arguments must be a JSON object, not %s", kind(v)))
	}
	if msg := t.args.Check(obj); msg != "" {
		return in, t.invalid(msg)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return in, t.invalid(fmt.Sprintf("at %s: value of type %s does not fit %s", te.Field, te.Value, te.Type))
		}
		return in, t.invalid(err.Error())
	}
	return in, ""
}

func (t *FuncTool[In, Out]) invalid(what string) string {
	return t.args.Invalid(t.spec.Name, what)
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}
