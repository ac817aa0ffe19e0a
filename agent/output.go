package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loomkit/loom/llm"
)

// outputSchema is a resolved Config.OutputSchema.
type outputSchema struct {
	shape    *llm.OutputShape
	resolved *jsonschema.Resolved
}

func newOutputSchema(s *jsonschema.Schema) (*outputSchema, error) {
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, &ConfigError{Field: "OutputSchema", Reason: fmt.Sprintf("cannot be resolved: %v", err)}
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, &ConfigError{Field: "OutputSchema", Reason: fmt.Sprintf("cannot be encoded: %v", err)}
	}
	return &outputSchema{shape: &llm.OutputShape{Name: "output", Schema: raw}, resolved: resolved}, nil
}

// check returns the answer's JSON text, or why it does not match.
func (o *outputSchema) check(text string) (string, error) {
	js := answerJSON(text)
	var v any
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return js, fmt.Errorf("the answer is not JSON: %v", err)
	}
	if dec.More() {
		return js, fmt.Errorf("the answer holds more than one JSON value")
	}
	if err := o.resolved.Validate(plainNumbers(v)); err != nil {
		return js, err
	}
	return js, nil
}

// plainNumbers turns json.Number values into float64 or int64 for the
// validator.
func plainNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return float64(i)
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, e := range v {
			v[k] = plainNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = plainNumbers(e)
		}
	}
	return v
}

// answerJSON strips white space and one Markdown code fence around a JSON
// answer, which models add even when asked not to.
func answerJSON(text string) string {
	s := strings.TrimSpace(text)
	if strings.HasPrefix(s, "```") && strings.HasSuffix(s, "```") && len(s) >= 6 {
		s = s[3 : len(s)-3]
		if nl := strings.IndexByte(s, '\n'); nl >= 0 && !strings.ContainsAny(s[:nl], "{[\"") {
			s = s[nl+1:] // the fence's language tag
		}
		s = strings.TrimSpace(s)
	}
	return s
}

func outputFeedback(err error) string {
	return fmt.Sprintf("Your answer does not match the required output schema: %v. Answer again with only the JSON value, matching the schema exactly.", err)
}

var schemaCache sync.Map // reflect.Type -> *jsonschema.Schema or error

func schemaFor[T any]() (*jsonschema.Schema, error) {
	t := reflect.TypeFor[T]()
	if v, ok := schemaCache.Load(t); ok {
		if err, isErr := v.(error); isErr {
			return nil, err
		}
		return v.(*jsonschema.Schema), nil
	}
	s, err := jsonschema.For[T](nil)
	if err != nil {
		err = &ConfigError{Field: "RunAs type", Reason: fmt.Sprintf("cannot infer a JSON Schema from %v: %v", t, err)}
		schemaCache.Store(t, err)
		return nil, err
	}
	schemaCache.Store(t, s)
	return s, nil
}

// RunAs runs the agent asking for a final answer that is a JSON value of
// type T: the JSON Schema is inferred from T (with jsonschema-go, as tool.Func
// does: fields without omitempty are required, unknown fields refused), the
// answer is validated, re-prompted with the validation error while turns
// remain, and decoded into T. The agent's own OutputSchema is replaced for
// this run.
//
// The Result is returned too, also when decoding fails (err is then an
// *OutputError).
func RunAs[T any](ctx context.Context, a *Agent, in Input) (T, Result, error) {
	var zero T
	s, err := schemaFor[T]()
	if err != nil {
		return zero, Result{}, err
	}
	os, err := newOutputSchema(s)
	if err != nil {
		return zero, Result{}, err
	}
	res, err := a.runWith(ctx, in, os)
	if err != nil {
		return zero, res, err
	}
	var v T
	if err := json.Unmarshal([]byte(answerJSON(res.Output)), &v); err != nil {
		return zero, res, &OutputError{Output: res.Output, Err: fmt.Errorf("decoding into %T: %w", v, err)}
	}
	return v, res, nil
}
