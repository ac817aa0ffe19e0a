package llm

import (
	"encoding/json"
	"fmt"
	"slices"
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

// Usage counts the tokens of a model call, or of several summed. Every
// adapter reports them in one convention, whatever its provider's wire
// format says:
//
//   - InputTokens is every token of the prompt, cached ones included
//     (OpenAI's prompt_tokens; Anthropic's input_tokens plus its cache
//     reads and writes, which its input_tokens leaves out);
//   - CacheReadTokens and CacheWriteTokens say how many of InputTokens were
//     read from, or written to, a prompt cache;
//   - OutputTokens is every token generated, reasoning included (OpenAI's
//     completion_tokens and Anthropic's output_tokens include it; where a
//     provider counts reasoning apart, as xAI and Gemini's OpenAI endpoint
//     do, the adapter adds it);
//   - ReasoningTokens says how many of OutputTokens were reasoning.
//
// So Total, InputTokens + OutputTokens, is what the call consumed, and the
// uncached input is InputTokens - CacheReadTokens - CacheWriteTokens.
//
// A count of zero means the provider reported zero or did not report that
// count. The difference matters only while a stream is folded, and
// UsageReport.Reported keeps it there.
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

// Total returns every token the call consumed: input (cached included)
// plus output (reasoning included).
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// IsZero reports whether every count is zero.
func (u Usage) IsZero() bool { return u == Usage{} }

// UsageFields is a set of the counts of a Usage.
type UsageFields uint8

// The counts of a Usage, as members of a UsageFields.
const (
	UsageInput UsageFields = 1 << iota
	UsageOutput
	UsageCacheRead
	UsageCacheWrite
	UsageReasoning

	// AllUsageFields holds every count.
	AllUsageFields = UsageInput | UsageOutput | UsageCacheRead | UsageCacheWrite | UsageReasoning
)

// usageFieldNames are the JSON names of the members, in bit order: those
// of Usage's fields.
var usageFieldNames = [...]string{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens"}

// NonZero returns the set of u's counts that are not zero.
func (u Usage) NonZero() UsageFields {
	var f UsageFields
	for i, n := range [...]int64{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens} {
		if n != 0 {
			f |= 1 << i
		}
	}
	return f
}

// MarshalJSON encodes the set as an array of count names
// (["input_tokens","cache_read_tokens"]).
func (f UsageFields) MarshalJSON() ([]byte, error) {
	if f&^AllUsageFields != 0 {
		return nil, fmt.Errorf("llm: usage fields %#x hold unknown members", uint8(f))
	}
	b := []byte{'['}
	for i, name := range usageFieldNames {
		if f&(1<<i) == 0 {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(append(append(b, '"'), name...), '"')
	}
	return append(b, ']'), nil
}

// UnmarshalJSON decodes what MarshalJSON encodes, refusing unknown names.
func (f *UsageFields) UnmarshalJSON(data []byte) error {
	var names []string
	if err := json.Unmarshal(data, &names); err != nil {
		return err
	}
	var out UsageFields
	for _, n := range names {
		i := slices.Index(usageFieldNames[:], n)
		if i < 0 {
			return fmt.Errorf("llm: unknown usage count %q", n)
		}
		out |= 1 << i
	}
	*f = out
	return nil
}
