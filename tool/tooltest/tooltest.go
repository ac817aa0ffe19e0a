// Package tooltest is a conformance suite for implementations of
// [tool.Tool]: any tool, hand-written or made with [tool.Func], should pass
// [Run].
//
// The suite checks that the spec's name is valid and its schema is a JSON
// Schema of type object; that arguments which are not JSON, not an object,
// of the wrong type, missing a required field or carrying an unknown field
// give an error result (a Go error is for the machinery) that names the
// field at fault, and never reach the tool's function when [Suite].Ran can
// tell; that every result is valid UTF-8; that a call with a cancelled
// context returns promptly; and that the given cases give the results they
// promise, also when run concurrently.
package tooltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

// Case is one call of the tool and what it must give.
type Case struct {
	// Name names the subtest.
	Name string
	// Args is the call's arguments (a JSON object).
	Args string
	// WantError says whether the result must be an error result.
	WantError bool
	// Contains, when set, must appear in the result's content.
	Contains string
	// Check, when set, inspects the result further.
	Check func(t *testing.T, res llm.ToolResult)
	// Blocks marks a call that runs until its context is cancelled (a
	// sleeping command, a request to a silent server). The suite runs it
	// with a context cancelled after a moment and checks it returns
	// promptly; the result is not checked against WantError or Contains.
	Blocks bool
}

// Suite is the conformance suite for one tool. Tool is required; the other
// fields are optional.
type Suite struct {
	Tool tool.Tool
	// Cases are calls that must succeed or fail as they say. A valid,
	// non-blocking case also serves as the base the suite corrupts into
	// invalid arguments; without one, invalid arguments are built from {}.
	Cases []Case
	// Ran, when set, returns how many times the tool's function has run so
	// far; the suite checks that invalid arguments do not increase it.
	Ran func() int
	// Timeout is how long the suite lets any call run before it cancels
	// the call's context; zero means 30 seconds.
	Timeout time.Duration
	// Prompt is how long a call may take to return once its context is
	// done; zero means 5 seconds. It guards against hangs, not for speed.
	Prompt time.Duration
}

// Run runs the suite on tl with cases.
func Run(t *testing.T, tl tool.Tool, cases ...Case) {
	t.Helper()
	(&Suite{Tool: tl, Cases: cases}).Run(t)
}

// Run runs the suite.
func (s *Suite) Run(t *testing.T) {
	t.Helper()
	if s.Tool == nil {
		t.Fatal("tooltest: Suite.Tool is nil")
	}
	spec := s.Tool.Spec()
	t.Run("Spec", func(t *testing.T) { checkSpec(t, spec) })
	schema := parseSchema(spec.Schema)
	t.Run("InvalidArguments", func(t *testing.T) { s.invalidArguments(t, schema) })
	t.Run("CancelledContext", s.cancelled)
	t.Run("Cases", func(t *testing.T) {
		for _, c := range s.Cases {
			t.Run(c.Name, func(t *testing.T) { s.runCase(t, c) })
		}
	})
	t.Run("Concurrent", s.concurrent)
}

func checkSpec(t *testing.T, spec llm.ToolSpec) {
	if err := tool.ValidateName(spec.Name); err != nil {
		t.Errorf("spec name: %v", err)
	}
	switch spec.Effect {
	case llm.EffectReadOnly, llm.EffectIdempotent, llm.EffectDestructive:
	default:
		t.Errorf("spec effect %q is none of read_only, idempotent or destructive", spec.Effect)
	}
	if len(spec.Schema) == 0 {
		t.Fatal("spec has no schema; a tool without arguments has {\"type\":\"object\"}")
	}
	var sch jsonschema.Schema
	if err := json.Unmarshal(spec.Schema, &sch); err != nil {
		t.Fatalf("spec schema is not a JSON Schema: %v\n%s", err, spec.Schema)
	}
	if sch.Type != "object" {
		t.Errorf("spec schema has type %q, want \"object\" (arguments are JSON objects)", sch.Type)
	}
	if _, err := sch.Resolve(nil); err != nil {
		t.Errorf("spec schema does not resolve: %v", err)
	}
}

func parseSchema(raw json.RawMessage) *jsonschema.Schema {
	var sch jsonschema.Schema
	if json.Unmarshal(raw, &sch) != nil {
		return &jsonschema.Schema{}
	}
	return &sch
}

// try runs one call and returns its result and what is wrong with it: a Go
// error, a panic, invalid UTF-8.
func (s *Suite) try(ctx context.Context, args string) (res llm.ToolResult, problems []string) {
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				problems = append(problems, fmt.Sprintf("Call(%s) panicked: %v", args, v))
			}
		}()
		res, err = s.Tool.Call(ctx, json.RawMessage(args))
	}()
	if err != nil {
		problems = append(problems, fmt.Sprintf("Call(%s) returned a Go error (reserved for the machinery; tool failures are error results): %v", args, err))
	}
	if !utf8.ValidString(res.Content) {
		problems = append(problems, fmt.Sprintf("Call(%s): content is not valid UTF-8: %q", args, res.Content))
	}
	return res, problems
}

// call runs one call, failing t on a Go error, a panic, invalid UTF-8 or a
// call that does not return.
func (s *Suite) call(t *testing.T, ctx context.Context, args string) llm.ToolResult {
	t.Helper()
	res, problems := s.bounded(ctx, args)
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
	return res
}

// bounded makes the call in another goroutine, cancelling it after Timeout,
// and gives up waiting for it Prompt after its context is done (the
// goroutine is then left behind: the call may never return).
func (s *Suite) bounded(ctx context.Context, args string) (llm.ToolResult, []string) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	type outcome struct {
		res      llm.ToolResult
		problems []string
	}
	done := make(chan outcome, 1)
	go func() {
		res, problems := s.try(ctx, args)
		done <- outcome{res, problems}
	}()
	select {
	case o := <-done:
		return o.res, o.problems
	case <-ctx.Done():
	}
	select {
	case o := <-done:
		return o.res, o.problems
	case <-time.After(s.prompt()):
		return llm.ToolResult{}, []string{fmt.Sprintf("Call(%s) did not return within %v of its context being done (%v)", args, s.prompt(), context.Cause(ctx))}
	}
}

func (s *Suite) base() map[string]any {
	for _, c := range s.Cases {
		if c.WantError || c.Blocks {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(c.Args), &m) == nil && m != nil {
			return m
		}
	}
	return map[string]any{}
}

type invalid struct {
	name, args string
	field      string // must appear in the message, when set
}

func (s *Suite) invalidCases(sch *jsonschema.Schema) []invalid {
	cases := []invalid{
		{name: "not JSON", args: `{"a": 1,`},
		{name: "trailing comma", args: `{"path": "a.go",}`},
		{name: "array", args: `[]`},
		{name: "string", args: `"a"`},
		{name: "null", args: `null`},
		{name: "number", args: `42`},
	}
	base := s.base()
	enc := func(m map[string]any) string {
		b, _ := json.Marshal(m)
		return string(b)
	}
	if isFalse(sch.AdditionalProperties) {
		m := maps.Clone(base)
		m["zz_no_such_field"] = 1
		cases = append(cases, invalid{name: "unknown field", args: enc(m), field: "zz_no_such_field"})
	}
	for _, r := range sch.Required {
		if _, ok := base[r]; !ok {
			continue
		}
		m := maps.Clone(base)
		delete(m, r)
		cases = append(cases, invalid{name: "missing " + r, args: enc(m), field: r})
	}
	for _, name := range slices.Sorted(maps.Keys(sch.Properties)) {
		p := sch.Properties[name]
		if p == nil {
			continue
		}
		v, ok := wrongValue(p)
		if !ok {
			continue
		}
		m := maps.Clone(base)
		m[name] = v
		cases = append(cases, invalid{name: "wrong type for " + name, args: enc(m), field: name})
	}
	return cases
}

// wrongValue returns a JSON value whose type p does not allow.
func wrongValue(p *jsonschema.Schema) (any, bool) {
	types := p.Types
	if p.Type != "" {
		types = []string{p.Type}
	}
	if len(types) == 0 {
		return nil, false
	}
	allowed := map[string]bool{}
	for _, t := range types {
		allowed[t] = true
	}
	candidates := []struct {
		typ string
		v   any
	}{{"boolean", true}, {"string", "a string"}, {"number", 1.5}, {"array", []any{}}, {"object", map[string]any{}}}
	for _, c := range candidates {
		if !allowed[c.typ] {
			return c.v, true
		}
	}
	return nil, false
}

func isFalse(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	b, err := json.Marshal(s)
	return err == nil && string(b) == "false"
}

func (s *Suite) invalidArguments(t *testing.T, sch *jsonschema.Schema) {
	before := 0
	if s.Ran != nil {
		before = s.Ran()
	}
	for _, c := range s.invalidCases(sch) {
		t.Run(c.name, func(t *testing.T) {
			res := s.call(t, context.Background(), c.args)
			if !res.IsError {
				t.Fatalf("Call(%s) = %q, want an error result", c.args, res.Content)
			}
			if strings.TrimSpace(res.Content) == "" {
				t.Errorf("Call(%s): error result says nothing", c.args)
			}
			if c.field != "" && !strings.Contains(res.Content, c.field) {
				t.Errorf("Call(%s): message does not name the field %q: %s", c.args, c.field, res.Content)
			}
		})
	}
	if s.Ran != nil {
		if after := s.Ran(); after != before {
			t.Errorf("the tool's function ran %d times on invalid arguments", after-before)
		}
	}
}

func (s *Suite) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return 30 * time.Second
}

func (s *Suite) prompt() time.Duration {
	if s.Prompt > 0 {
		return s.Prompt
	}
	return 5 * time.Second
}

func (s *Suite) cancelled(t *testing.T) {
	argsList := []string{"{}"}
	for _, c := range s.Cases {
		argsList = append(argsList, c.Args)
	}
	for _, args := range argsList {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errors.New("tooltest: cancelled before the call"))
		t.Run("", func(t *testing.T) { s.call(t, ctx, args) })
	}
}

func (s *Suite) runCase(t *testing.T, c Case) {
	if c.Blocks {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(50 * time.Millisecond)
			cancel()
		}()
		defer cancel()
		s.call(t, ctx, c.Args)
		return
	}
	res := s.call(t, context.Background(), c.Args)
	check(t, c, res)
}

func check(t *testing.T, c Case, res llm.ToolResult) {
	t.Helper()
	if res.IsError != c.WantError {
		t.Errorf("Call(%s): IsError = %v, want %v; content: %s", c.Args, res.IsError, c.WantError, res.Content)
	}
	if c.Contains != "" && !strings.Contains(res.Content, c.Contains) {
		t.Errorf("Call(%s): content lacks %q: %s", c.Args, c.Contains, res.Content)
	}
	if c.Check != nil {
		c.Check(t, res)
	}
}

// concurrent runs the non-blocking cases from several goroutines at once;
// under the race detector this finds shared state without locks. Cases of
// tools that change the world may legitimately fail when repeated (an edit
// applies once), so only read-only tools must give the same verdict again.
func (s *Suite) concurrent(t *testing.T) {
	var cases []Case
	for _, c := range s.Cases {
		if !c.Blocks {
			cases = append(cases, c)
		}
	}
	if len(cases) == 0 {
		t.Skip("no non-blocking cases to run concurrently")
	}
	var wg sync.WaitGroup
	results := make([]llm.ToolResult, 4*len(cases))
	errs := make([]error, len(results))
	for i := range results {
		wg.Go(func() {
			var problems []string
			results[i], problems = s.bounded(context.Background(), cases[i%len(cases)].Args)
			if len(problems) > 0 {
				errs[i] = errors.New(strings.Join(problems, "; "))
			}
		})
	}
	wg.Wait()
	for i, res := range results {
		c := cases[i%len(cases)]
		if errs[i] != nil {
			t.Errorf("concurrent Call(%s): %v", c.Args, errs[i])
			continue
		}
		if s.Tool.Spec().Effect == llm.EffectReadOnly && res.IsError != c.WantError {
			t.Errorf("concurrent Call(%s): IsError = %v, want %v; content: %s", c.Args, res.IsError, c.WantError, res.Content)
		}
	}
}
