package run

import (
	"fmt"
	"slices"

	"github.com/loomkit/loom/llm"
)

// Config is everything a run is started with. It is plain data, encoded as
// part of the run's snapshot. The zero value is valid except that a run
// needs something to send: a Prompt, or an Input ending in a user message.
//
// The run keeps its own copy of Input; Tools, Stop and the other slices are
// shared with the CallModel requests it emits and must not be modified
// while the run is in use.
type Config struct {
	// Model names the model for the adapter; empty means its default.
	Model string `json:"model,omitempty"`
	// System is the system prompt.
	System string `json:"system,omitempty"`
	// Input is the conversation before this run. It is sent with every
	// request and excluded from the run's new messages.
	Input []llm.Message `json:"input,omitempty"`
	// Prompt is the new user message that starts the run; it becomes the
	// run's first new message. It may be empty when Input already ends with
	// the user's turn.
	Prompt llm.Message `json:"prompt,omitzero"`
	// Tools are the tools advertised on every turn.
	Tools []llm.ToolSpec `json:"tools,omitempty"`
	// ToolChoice applies to every turn but a final (tool-free) one. A
	// choice the tools cannot satisfy is a *ConfigError before any call.
	// Under required or specific every turn must call a tool, so such a
	// run ends only through GracefulLastTurn, WrapUp or the turn budget.
	ToolChoice llm.ToolChoice `json:"tool_choice,omitzero"`
	// MaxTurns is the exact number of model calls the run may make: the
	// first call, every continuation after tools and every re-prompt. Nil
	// means 1; a pointer to 0 allows none. See Turns.
	MaxTurns *int `json:"max_turns,omitempty"`
	// MaxInvalidRetries is how many Retry resolutions of invalid tool
	// calls the whole run accepts (0: none).
	MaxInvalidRetries int `json:"max_invalid_retries,omitempty"`
	// GracefulLastTurn makes the last allowed model call tool-free (tool
	// choice none; the tools stay declared because some providers refuse a
	// history with tool calls otherwise, and a call made anyway is dropped)
	// so that its text ends the run instead of failing with *MaxTurnsError.
	GracefulLastTurn bool `json:"graceful_last_turn,omitempty"`

	// Sampling, passed through to every request; see llm.Request.
	MaxTokens   int              `json:"max_tokens,omitempty"`
	Temperature *float64         `json:"temperature,omitempty"`
	TopP        *float64         `json:"top_p,omitempty"`
	Stop        []string         `json:"stop,omitempty"`
	Schema      *llm.OutputShape `json:"output_schema,omitempty"`
}

// Turns returns a pointer to n, for Config.MaxTurns.
func Turns(n int) *int { return &n }

// maxTurns is the effective budget.
func (c *Config) maxTurns() int {
	if c.MaxTurns == nil {
		return 1
	}
	return *c.MaxTurns
}

// rules are what a run derives from its Config: recomputed on restore,
// never encoded.
type rules struct {
	allowed     map[string]bool // names callable on a normal turn
	allowedList []string        // the same, sorted
	specs       map[string]int  // tool name -> index in Config.Tools
}

// check validates c against the history it will be sent with and derives
// the rules. The checks are the ones a provider would otherwise fail on
// after a network round trip, or that would make the run's decisions
// ambiguous.
func (c *Config) check() (rules, error) {
	var ru rules
	if c.MaxTurns != nil && *c.MaxTurns < 0 {
		return ru, &ConfigError{Field: "MaxTurns", Reason: fmt.Sprintf("%d is negative; use 0 to allow no model call", *c.MaxTurns)}
	}
	if c.MaxInvalidRetries < 0 {
		return ru, &ConfigError{Field: "MaxInvalidRetries", Reason: fmt.Sprintf("%d is negative", c.MaxInvalidRetries)}
	}
	if c.MaxTokens < 0 {
		return ru, &ConfigError{Field: "MaxTokens", Reason: fmt.Sprintf("%d is negative", c.MaxTokens)}
	}
	ru.specs = make(map[string]int, len(c.Tools))
	for i, t := range c.Tools {
		if t.Name == "" {
			return ru, &ConfigError{Field: "Tools", Reason: fmt.Sprintf("tool %d has no name", i)}
		}
		if _, dup := ru.specs[t.Name]; dup {
			return ru, &ConfigError{Field: "Tools", Reason: fmt.Sprintf("two tools are named %q; names must be unique", t.Name)}
		}
		ru.specs[t.Name] = i
	}
	allowed, err := c.ToolChoice.Allowed(c.Tools)
	if err != nil {
		return ru, &ConfigError{Field: "ToolChoice", Reason: err.Error()}
	}
	ru.allowed = allowed
	ru.allowedList = make([]string, 0, len(allowed))
	for n := range allowed {
		ru.allowedList = append(ru.allowedList, n)
	}
	slices.Sort(ru.allowedList)
	if len(c.Prompt.Parts) > 0 && c.Prompt.Role != llm.RoleUser {
		return ru, &ConfigError{Field: "Prompt", Reason: fmt.Sprintf("role is %q; the prompt must be a user message", c.Prompt.Role)}
	}
	for i, m := range c.Input {
		for _, p := range m.Parts {
			if p == nil {
				return ru, &ConfigError{Field: "Input", Reason: fmt.Sprintf("message %d holds a nil part", i)}
			}
		}
	}
	for _, p := range c.Prompt.Parts {
		if p == nil {
			return ru, &ConfigError{Field: "Prompt", Reason: "holds a nil part"}
		}
	}
	if len(c.Input) == 0 && len(c.Prompt.Parts) == 0 {
		return ru, &ConfigError{Field: "Prompt", Reason: "is empty and there is no Input: the run has nothing to send"}
	}
	return ru, nil
}
