package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

func echo(name string) tool.Tool {
	return tool.Func(name, "echoes", func(ctx context.Context, in struct {
		S string `json:"s,omitempty"`
	}) (string, error) {
		return name + ":" + in.S, nil
	}, nil)
}

// panicky is a hand-written tool (not Func) that panics.
type panicky struct{}

func (panicky) Spec() llm.ToolSpec { return llm.ToolSpec{Name: "panicky"} }
func (panicky) Call(context.Context, json.RawMessage) (llm.ToolResult, error) {
	panic("oh no")
}

func TestSetOrderAndLookup(t *testing.T) {
	s, err := tool.NewSet(echo("zeta"), echo("alpha"), echo("mid"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"zeta", "alpha", "mid"}
	if got := s.Names(); !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	for i, sp := range s.Specs() {
		if sp.Name != want[i] {
			t.Errorf("Specs[%d] = %q, want %q", i, sp.Name, want[i])
		}
	}
	if tl, ok := s.Lookup("alpha"); !ok || tl.Spec().Name != "alpha" {
		t.Errorf("Lookup(alpha) = %v, %v", tl, ok)
	}
	if _, ok := s.Lookup("nope"); ok {
		t.Error("Lookup(nope) found something")
	}
	s2, err := s.With(echo("last"))
	if err != nil || s2.Len() != 4 || s.Len() != 3 {
		t.Errorf("With: len %d (orig %d), %v", s2.Len(), s.Len(), err)
	}
	var zero tool.Set
	if zero.Len() != 0 || len(zero.Specs()) != 0 {
		t.Error("zero Set is not empty")
	}
	if _, ok := zero.Lookup("x"); ok {
		t.Error("zero Set found a tool")
	}
}

func TestSetRefuses(t *testing.T) {
	_, err := tool.NewSet(echo("a"), echo("b"), echo("a"))
	var ne *tool.NameError
	if !errors.As(err, &ne) || !errors.Is(err, tool.ErrDuplicateName) || ne.Name != "a" {
		t.Errorf("duplicate: err = %v", err)
	}
	_, err = tool.NewSet(panickyNamed{"fs.read/file"})
	if !errors.Is(err, tool.ErrInvalidName) {
		t.Errorf("invalid name: err = %v", err)
	}
	if _, err := tool.NewSet(echo("a"), nil); err == nil {
		t.Error("nil tool accepted")
	}
}

type panickyNamed struct{ name string }

func (p panickyNamed) Spec() llm.ToolSpec { return llm.ToolSpec{Name: p.name} }
func (panickyNamed) Call(context.Context, json.RawMessage) (llm.ToolResult, error) {
	return llm.ToolResult{}, nil
}

func TestSetCall(t *testing.T) {
	s, err := tool.NewSet(echo("echo"), panicky{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cases := []struct {
		name    string
		call    llm.ToolCall
		isErr   bool
		content string
	}{
		{"ok", llm.ToolCall{ID: "1", Name: "echo", Arguments: `{"s":"hi"}`}, false, "echo:hi"},
		{"empty args", llm.ToolCall{ID: "2", Name: "echo", Arguments: ""}, false, "echo:"},
		{"unknown tool", llm.ToolCall{ID: "3", Name: "rm_everything"}, true, `no tool named "rm_everything"`},
		{"malformed", llm.ToolCall{ID: "4", Name: "echo", Arguments: `{"s": "a",}`, Malformed: true}, true, "not valid JSON"},
		{"incomplete", llm.ToolCall{ID: "5", Name: "echo", Arguments: `{"s": "a`, Incomplete: true}, true, "cut off"},
		{"panic", llm.ToolCall{ID: "6", Name: "panicky"}, true, "oh no"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := s.Call(ctx, c.call)
			if err != nil {
				t.Fatalf("Go error: %v", err)
			}
			if res.CallID != c.call.ID || res.Name != c.call.Name {
				t.Errorf("ids %q/%q, want %q/%q", res.CallID, res.Name, c.call.ID, c.call.Name)
			}
			if res.IsError != c.isErr || !strings.Contains(res.Content, c.content) {
				t.Errorf("result %+v, want error=%v containing %q", res, c.isErr, c.content)
			}
		})
	}
	if res, _ := s.Call(ctx, llm.ToolCall{Name: "nope"}); !strings.Contains(res.Content, "echo, panicky") {
		t.Errorf("unknown tool result %q does not list the tools", res.Content)
	}
}

func TestRecover(t *testing.T) {
	res, err := tool.Recover(panicky{}).Call(context.Background(), json.RawMessage(`{}`))
	if err != nil || !res.IsError || !strings.Contains(res.Content, "oh no") {
		t.Errorf("Recover: %+v, %v", res, err)
	}
}

func TestChainOrder(t *testing.T) {
	var order []string
	mw := func(name string) tool.Middleware {
		return func(next tool.Tool) tool.Tool {
			return tool.Wrap(next, func(ctx context.Context, args json.RawMessage) (llm.ToolResult, error) {
				order = append(order, name)
				return next.Call(ctx, args)
			})
		}
	}
	tl := tool.Chain(echo("e"), mw("a"), mw("b"))
	if _, err := tl.Call(context.Background(), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"a", "b"}) {
		t.Errorf("order %v, want [a b]", order)
	}
	if tl.Spec().Name != "e" {
		t.Errorf("wrapped spec name %q", tl.Spec().Name)
	}
}

// ADVERSARIAL 37: five calls at once; two succeed, one errors, one panics,
// one outlives its deadline. Each gets exactly one result, with its id.
func TestSetCallParallelMixed(t *testing.T) {
	ok := echo("ok")
	failing := tool.Func("failing", "", func(ctx context.Context, in struct{}) (string, error) {
		return "", errors.New("it failed")
	}, nil)
	slow := tool.Func("slow", "", func(ctx context.Context, in struct{}) (string, error) {
		<-ctx.Done()
		return "", context.Cause(ctx)
	}, nil)
	s, err := tool.NewSet(ok, failing, panicky{}, slow)
	if err != nil {
		t.Fatal(err)
	}
	calls := []llm.ToolCall{
		{ID: "a", Name: "ok", Arguments: `{"s":"1"}`},
		{ID: "b", Name: "ok", Arguments: `{"s":"2"}`},
		{ID: "c", Name: "failing"},
		{ID: "d", Name: "panicky"},
		{ID: "e", Name: "slow"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	results := make([]llm.ToolResult, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			r, err := s.Call(ctx, c)
			if err != nil {
				t.Errorf("call %s: Go error %v", c.ID, err)
			}
			results[i] = r
		})
	}
	wg.Wait()
	wantErr := []bool{false, false, true, true, true}
	for i, r := range results {
		if r.CallID != calls[i].ID || r.Name != calls[i].Name || r.IsError != wantErr[i] || r.Content == "" {
			t.Errorf("result %d = %+v", i, r)
		}
	}
	if !strings.Contains(results[4].Content, "deadline") {
		t.Errorf("timed-out call says %q", results[4].Content)
	}
}

func TestSetCallMalformedFlagHonoured(t *testing.T) {
	s, _ := tool.NewSet(echo("echo"))
	res, _ := s.Call(context.Background(), llm.ToolCall{ID: "1", Name: "echo", Arguments: `{"s":"x"}`, Malformed: true})
	if !res.IsError || !strings.Contains(res.Content, "malformed") {
		t.Errorf("a call marked malformed ran: %+v", res)
	}
}
