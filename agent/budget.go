package agent

import (
	"fmt"
	"strings"
	"time"

	"github.com/loomkit/loom/llm"
)

// Budget limits what a run may spend. Each limit is off when zero. When
// a run passes the soft threshold of a limit (Soft, a fraction of it) the
// model gets a note, with the next tool results, asking it to wrap up;
// when it reaches the limit itself the run asks for a tool-free final
// answer, or fails with *BudgetError when Fail is set.
//
// Limits are checked between steps: a model call or tool that is running
// is not interrupted (give the context a deadline for that).
type Budget struct {
	// MaxTokens limits input plus output tokens (llm.Usage.Total: cached
	// input and reasoning included) summed over the run's model calls.
	MaxTokens int64
	// MaxCostUSD limits the cost in US dollars, priced with Prices and
	// DefaultPrices by the model each call reports (or Config.ModelName).
	// A call of a model without a price fails the run with *BudgetError.
	MaxCostUSD float64
	// MaxDuration limits the time the run is driven (by Config.Clock),
	// summed over its resumptions; time suspended waiting for approval
	// does not count.
	MaxDuration time.Duration
	// MaxToolCalls limits the tool calls the run executes. Calls beyond it
	// are not run; they get an error result saying so.
	MaxToolCalls int
	// Soft is the fraction of a limit at which the model is told to wrap
	// up: 0 means 0.8; a negative value sends no such note.
	Soft float64
	// Fail makes a reached limit fail the run with *BudgetError instead of
	// asking the model for a final answer without tools.
	Fail bool
	// Prices adds to and overrides DefaultPrices, by model name.
	Prices map[string]Price
}

func (b Budget) soft() float64 {
	switch {
	case b.Soft == 0:
		return 0.8
	case b.Soft < 0:
		return 0
	}
	return b.Soft
}

func (b Budget) check() error {
	switch {
	case b.MaxTokens < 0:
		return &ConfigError{Field: "Budget.MaxTokens", Reason: "is negative; use 0 for no limit"}
	case b.MaxCostUSD < 0:
		return &ConfigError{Field: "Budget.MaxCostUSD", Reason: "is negative; use 0 for no limit"}
	case b.MaxDuration < 0:
		return &ConfigError{Field: "Budget.MaxDuration", Reason: "is negative; use 0 for no limit"}
	case b.MaxToolCalls < 0:
		return &ConfigError{Field: "Budget.MaxToolCalls", Reason: "is negative; use 0 for no limit"}
	case b.Soft >= 1:
		return &ConfigError{Field: "Budget.Soft", Reason: fmt.Sprintf("%v is not below 1; it is a fraction of each limit, such as 0.8", b.Soft)}
	}
	for name, p := range b.Prices {
		if p.Input < 0 || p.Output < 0 || p.CacheRead < 0 || p.CacheWrite < 0 {
			return &ConfigError{Field: "Budget.Prices", Reason: fmt.Sprintf("the price of %q is negative", name)}
		}
	}
	return nil
}

// Price is what a model costs, in US dollars per million tokens.
// CacheRead and CacheWrite price the input tokens read from or written to
// a prompt cache; zero means they cost what Input costs.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read,omitempty"`
	CacheWrite float64 `json:"cache_write,omitempty"`
}

// Cost returns what u costs at p, in US dollars. Input tokens include the
// cache reads and writes (llm.Usage's convention, which every adapter
// follows): the uncached ones are priced at Input, cache reads at
// CacheRead and cache writes at CacheWrite; output tokens, reasoning
// included, at Output.
func (p Price) Cost(u llm.Usage) float64 {
	plain := u.InputTokens - u.CacheReadTokens - u.CacheWriteTokens
	if plain < 0 {
		plain = u.InputTokens
	}
	read, write := p.CacheRead, p.CacheWrite
	if read == 0 {
		read = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	return (float64(plain)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadTokens)*read + float64(u.CacheWriteTokens)*write) / 1e6
}

// DefaultPrices are list prices of a few well-known models, in US dollars
// per million tokens, as published by their vendors when this table was
// written. Prices change: set Budget.Prices for the models you use. A
// model name matches an entry exactly, or by the longest entry that it
// starts with ("claude-sonnet-4-5-20250929" matches "claude-sonnet-4-5").
// Do not modify the map; copy it.
//
// Anthropic's cache writes are the 5-minute ones (1.25 times the input
// price; the 1-hour ones cost twice the input price and are not told apart
// in the usage), its cache reads a tenth of the input price. Entries exist
// for newer models whose names start with an older one's
// ("claude-opus-4-5" is not priced as "claude-opus-4").
var DefaultPrices = map[string]Price{
	"gpt-5":             {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5-mini":        {Input: 0.25, Output: 2, CacheRead: 0.025},
	"gpt-5-nano":        {Input: 0.05, Output: 0.40, CacheRead: 0.005},
	"gpt-4o":            {Input: 2.50, Output: 10, CacheRead: 1.25},
	"gpt-4o-mini":       {Input: 0.15, Output: 0.60, CacheRead: 0.075},
	"gpt-4.1":           {Input: 2, Output: 8, CacheRead: 0.50},
	"gpt-4.1-mini":      {Input: 0.40, Output: 1.60, CacheRead: 0.10},
	"gpt-4.1-nano":      {Input: 0.10, Output: 0.40, CacheRead: 0.025},
	"o3":                {Input: 2, Output: 8, CacheRead: 0.50},
	"o3-mini":           {Input: 1.10, Output: 4.40, CacheRead: 0.55},
	"o3-pro":            {Input: 20, Output: 80},
	"o4-mini":           {Input: 1.10, Output: 4.40, CacheRead: 0.275},
	"claude-opus-4":     {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75},
	"claude-opus-4-5":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25},
	"claude-opus-4-6":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25},
	"claude-sonnet-4":   {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-sonnet-4-6": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25},
	"claude-3-5-haiku":  {Input: 0.80, Output: 4, CacheRead: 0.08, CacheWrite: 1},
}

// PriceOf returns the price of the model called name, from b.Prices then
// DefaultPrices, matching exactly or by the longest prefix.
func (b Budget) PriceOf(name string) (Price, bool) {
	if p, ok := lookupPrice(b.Prices, name); ok {
		return p, true
	}
	return lookupPrice(DefaultPrices, name)
}

func lookupPrice(table map[string]Price, name string) (Price, bool) {
	if name == "" {
		return Price{}, false
	}
	if p, ok := table[name]; ok {
		return p, true
	}
	best, found := "", false
	var price Price
	for k, p := range table {
		if strings.HasPrefix(name, k) && len(k) > len(best) {
			best, price, found = k, p, true
		}
	}
	return price, found
}

// limits is a budget's view of what a run has spent.
type spent struct {
	tokens    int64
	cost      float64
	elapsed   time.Duration
	toolCalls int
}

// limitState says where one limit stands.
type limitState struct {
	name string
	max  float64
	used float64
}

func (b Budget) states(s spent) []limitState {
	var out []limitState
	if b.MaxTokens > 0 {
		out = append(out, limitState{"tokens", float64(b.MaxTokens), float64(s.tokens)})
	}
	if b.MaxCostUSD > 0 {
		out = append(out, limitState{"cost", b.MaxCostUSD, s.cost})
	}
	if b.MaxDuration > 0 {
		out = append(out, limitState{"time", b.MaxDuration.Seconds(), s.elapsed.Seconds()})
	}
	if b.MaxToolCalls > 0 {
		out = append(out, limitState{"tool_calls", float64(b.MaxToolCalls), float64(s.toolCalls)})
	}
	return out
}

func limitNoun(name string) string {
	switch name {
	case "tokens":
		return "token"
	case "cost":
		return "cost"
	case "time":
		return "time"
	}
	return "tool-call"
}

// softNote is the note sent when a limit passes its soft threshold.
func softNote(l limitState) string {
	return fmt.Sprintf("Note: this run has used %.0f%% of its %s budget. Wrap up: finish the most important part of the task and give your final answer soon.", 100*l.used/l.max, limitNoun(l.name))
}

// hardNote is the reason sent with the tool-free final call when a limit
// is reached.
func hardNote(l limitState) string {
	return fmt.Sprintf("The run's %s budget is spent, so tools are no longer available. Give your final answer now with what you have.", limitNoun(l.name))
}
