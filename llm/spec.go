package llm

import (
	"encoding/json"
	"fmt"
)

// Effect says what running a tool does to the world. It decides what a
// driver may do without asking: read-only tools may run in parallel, and a
// call that may have started before a crash is re-run on resume only if its
// tool is read-only or idempotent.
type Effect string

const (
	// EffectDestructive is the zero value: a tool that says nothing is
	// assumed to change the world in a way that must not be repeated.
	EffectDestructive Effect = ""
	// EffectReadOnly tools change nothing.
	EffectReadOnly Effect = "read_only"
	// EffectIdempotent tools change the world, but running them twice
	// with the same arguments is the same as running them once.
	EffectIdempotent Effect = "idempotent"
)

// SafeToRepeat reports whether a call may run again without harm.
func (e Effect) SafeToRepeat() bool { return e == EffectReadOnly || e == EffectIdempotent }

// String returns the effect's name; the zero value reads "destructive".
func (e Effect) String() string {
	if e == EffectDestructive {
		return "destructive"
	}
	return string(e)
}

// ToolSpec describes a tool to the model and to the run machine.
// Schema is the JSON Schema of the tool's arguments (an object schema).
type ToolSpec struct {
	Name          string          `json:"name"`
	Description   string          `json:"description,omitempty"`
	Schema        json.RawMessage `json:"schema,omitempty"`
	NeedsApproval bool            `json:"needs_approval,omitempty"`
	Effect        Effect          `json:"effect,omitempty"`
}

// ToolChoiceMode says how the model may use tools on a turn.
type ToolChoiceMode string

const (
	// ToolAuto lets the model choose (the zero value).
	ToolAuto ToolChoiceMode = ""
	// ToolRequired makes the model call at least one advertised tool.
	ToolRequired ToolChoiceMode = "required"
	// ToolNone forbids tool calls.
	ToolNone ToolChoiceMode = "none"
	// ToolSpecific makes the model call one of Names.
	ToolSpecific ToolChoiceMode = "specific"
)

// ToolChoice is the tool choice of a request. The zero value is auto.
type ToolChoice struct {
	Mode  ToolChoiceMode `json:"mode,omitempty"`
	Names []string       `json:"names,omitempty"`
}

// ChooseTools returns a ToolChoice that makes the model call one of names.
func ChooseTools(names ...string) ToolChoice {
	return ToolChoice{Mode: ToolSpecific, Names: append([]string(nil), names...)}
}

// Allowed returns the names a model may call under c when tools are
// advertised, or an error when c cannot be satisfied by them (requiring tools
// when none is advertised, or naming one that is not advertised).
func (c ToolChoice) Allowed(tools []ToolSpec) (map[string]bool, error) {
	advertised := make(map[string]bool, len(tools))
	for _, t := range tools {
		advertised[t.Name] = true
	}
	switch c.Mode {
	case ToolAuto:
		return advertised, nil
	case ToolRequired:
		if len(tools) == 0 {
			return nil, fmt.Errorf("tool choice %q needs at least one advertised tool, and none is", c.Mode)
		}
		return advertised, nil
	case ToolNone:
		return map[string]bool{}, nil
	case ToolSpecific:
		if len(c.Names) == 0 {
			return nil, fmt.Errorf("tool choice %q names no tool", c.Mode)
		}
		allowed := make(map[string]bool, len(c.Names))
		for _, n := range c.Names {
			if !advertised[n] {
				return nil, fmt.Errorf("tool choice names %q, which is not an advertised tool", n)
			}
			allowed[n] = true
		}
		return allowed, nil
	}
	return nil, fmt.Errorf("unknown tool choice mode %q", c.Mode)
}

// Usage counts tokens. Zero means "not reported". InputTokens includes
// cached input where the provider reports it that way; the cache fields say
// how much of it was read from or written to a prompt cache.
type Usage struct {
	InputTokens      int64 `json:"input_tokens,omitempty"`
	OutputTokens     int64 `json:"output_tokens,omitempty"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoning_tokens,omitempty"`
}

// Add returns the field-by-field sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		ReasoningTokens:  u.ReasoningTokens + v.ReasoningTokens,
	}
}

// Total returns input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// IsZero reports whether nothing was reported.
func (u Usage) IsZero() bool { return u == Usage{} }

// merge takes, field by field, the later report where it says anything:
// providers report usage cumulatively, sometimes split across events.
func (u Usage) merge(v Usage) Usage {
	pick := func(a, b int64) int64 {
		if b != 0 {
			return b
		}
		return a
	}
	return Usage{
		InputTokens:      pick(u.InputTokens, v.InputTokens),
		OutputTokens:     pick(u.OutputTokens, v.OutputTokens),
		CacheReadTokens:  pick(u.CacheReadTokens, v.CacheReadTokens),
		CacheWriteTokens: pick(u.CacheWriteTokens, v.CacheWriteTokens),
		ReasoningTokens:  pick(u.ReasoningTokens, v.ReasoningTokens),
	}
}
