package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/loomkit/loom/llm"
)

// validName is the name rule shared by the providers loom speaks to.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ErrInvalidName is wrapped by a [*NameError] for a name that is not 1 to 64
// letters, digits, '_' or '-'.
var ErrInvalidName = errors.New("tool names are 1 to 64 letters, digits, '_' or '-'")

// ErrDuplicateName is wrapped by a [*NameError] when two tools of a set share
// a name.
var ErrDuplicateName = errors.New("two tools have the same name")

// NameError reports a tool name that cannot be used. Err is
// [ErrInvalidName] or [ErrDuplicateName].
type NameError struct {
	Name string
	Err  error
}

func (e *NameError) Error() string {
	if errors.Is(e.Err, ErrDuplicateName) {
		return fmt.Sprintf("tool %q is given twice: rename one of them, tool names must be unique", e.Name)
	}
	return fmt.Sprintf("invalid tool name %q: %v", e.Name, e.Err)
}

func (e *NameError) Unwrap() error { return e.Err }

// ValidateName returns a [*NameError] wrapping [ErrInvalidName] unless name
// is 1 to 64 letters, digits, '_' or '-'.
func ValidateName(name string) error {
	if !validName.MatchString(name) {
		return &NameError{Name: name, Err: ErrInvalidName}
	}
	return nil
}

// Set is a fixed collection of tools with unique, valid names, kept in the
// order they were given. The zero Set is empty and usable. A Set is
// immutable and safe for concurrent use.
type Set struct {
	tools  []Tool
	byName map[string]Tool
}

// NewSet returns a set of tools in the order given. It returns a
// [*NameError] when a name is invalid or given twice, and an error for a nil
// tool.
func NewSet(tools ...Tool) (*Set, error) {
	s := &Set{tools: make([]Tool, 0, len(tools)), byName: make(map[string]Tool, len(tools))}
	for i, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("tool %d of %d is nil", i+1, len(tools))
		}
		name := t.Spec().Name
		if err := ValidateName(name); err != nil {
			return nil, err
		}
		if _, dup := s.byName[name]; dup {
			return nil, &NameError{Name: name, Err: ErrDuplicateName}
		}
		s.byName[name] = t
		s.tools = append(s.tools, t)
	}
	return s, nil
}

// With returns a new set holding the tools of s followed by tools, or an
// error as [NewSet] does. s is not changed.
func (s *Set) With(tools ...Tool) (*Set, error) {
	return NewSet(append(s.Tools(), tools...)...)
}

// Lookup returns the tool called name.
func (s *Set) Lookup(name string) (Tool, bool) {
	if s == nil {
		return nil, false
	}
	t, ok := s.byName[name]
	return t, ok
}

// Len returns the number of tools.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tools)
}

// Tools returns the tools in order. The slice is the caller's.
func (s *Set) Tools() []Tool {
	if s == nil {
		return nil
	}
	return slices.Clone(s.tools)
}

// Names returns the tool names in order.
func (s *Set) Names() []string {
	names := make([]string, 0, s.Len())
	for _, t := range s.Tools() {
		names = append(names, t.Spec().Name)
	}
	return names
}

// Specs returns the specs to advertise to a model, in the order the tools
// were given, so that requests are byte-identical from turn to turn (prompt
// caches depend on it). The slice is the caller's.
func (s *Set) Specs() []llm.ToolSpec {
	specs := make([]llm.ToolSpec, 0, s.Len())
	for _, t := range s.Tools() {
		specs = append(specs, t.Spec())
	}
	return specs
}

// NeedsApproval reports whether call needs a decision before it runs: see
// the package function [NeedsApproval]. A call of an unknown tool needs none
// (it will only produce an error result).
func (s *Set) NeedsApproval(call llm.ToolCall) bool {
	t, ok := s.Lookup(call.Name)
	if !ok {
		return false
	}
	return NeedsApproval(t, call.Args())
}

// Call runs call with the tool of that name and returns its result with
// CallID and Name filled in. Everything that can go wrong with the call
// itself becomes an error result the model can act on, never a Go error: an
// unknown tool (the result lists the tools there are), arguments that are
// not one JSON object (the result carries the parse error), a call cut off
// by the end of the stream, a call marked Malformed, a panic. Empty
// arguments are passed as {}. Images of the result that the providers
// would refuse are left out, with a line saying why ([DropRefusedImages]).
// The Go error is the tool's own machinery error, passed through.
func (s *Set) Call(ctx context.Context, call llm.ToolCall) (res llm.ToolResult, err error) {
	defer func() {
		res.CallID, res.Name = call.ID, call.Name
	}()
	t, ok := s.Lookup(call.Name)
	if !ok {
		return ErrorResult(fmt.Sprintf("There is no tool named %q. The tools are: %s.", call.Name, strings.Join(s.Names(), ", "))), nil
	}
	if call.Incomplete {
		return ErrorResult(fmt.Sprintf("The call of %s was cut off before its arguments were complete, so it was not run. Send the call again.", call.Name)), nil
	}
	if err := call.ArgumentsError(); err != nil || call.Malformed {
		why := "its arguments were malformed"
		if err != nil {
			why = err.Error()
		}
		return ErrorResult(fmt.Sprintf("The call of %s was not run: %s. Send the arguments as one JSON object.", call.Name, why)), nil
	}
	res, err = callSafely(ctx, t, call.Args())
	return DropRefusedImages(res), err
}

// callSafely runs t, turning a panic into an error result.
func callSafely(ctx context.Context, t Tool, args json.RawMessage) (res llm.ToolResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = panicResult(t.Spec().Name, v), nil
		}
	}()
	return t.Call(ctx, args)
}

func panicResult(name string, v any) llm.ToolResult {
	return ErrorResult(fmt.Sprintf("Tool %s failed unexpectedly (panic: %v). This is a bug in the tool, not in the arguments.", name, v))
}
