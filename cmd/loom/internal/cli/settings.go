package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/store"
)

// settingsFormat is the format of the settings loom keeps per run.
const settingsFormat = 1

// settings are what loom resume needs to rebuild the agent of a run the
// way it was: the agent refuses to resume a run under another model name,
// system prompt, toolset or turn budget, and the store keeps only the
// model's name. No secret is kept: keys come from the environment again.
type settings struct {
	Format     int      `json:"format"`
	Model      string   `json:"model"`                 // as given: "openai:gpt-4o"
	BaseURL    string   `json:"base_url,omitempty"`    // as resolved
	Workspace  string   `json:"workspace"`             // absolute
	System     string   `json:"system"`                // the whole system prompt sent
	SystemFlag string   `json:"system_flag,omitempty"` // --system as given
	MaxTurns   int      `json:"max_turns"`
	MCP        []string `json:"mcp,omitempty"`         // --mcp values
	ProjectMCP bool     `json:"project_mcp,omitempty"` // the .mcp.json servers were started
	Graceful   bool     `json:"graceful,omitempty"`    // the last allowed turn is tool-free
	// Sandbox is --sandbox; "" (settings saved before loom had one) is
	// off, the way those runs started.
	Sandbox string `json:"sandbox,omitempty"`
	Network bool   `json:"allow_network,omitempty"` // --allow-network
}

// The store has no place for a driver's own data about a run, so the
// settings are kept as a one-message conversation of their own, named
// after the run. Conversations are not runs: loom runs does not list them.
func settingsKey(runID string) string { return "loom-cli/settings/" + runID }

func saveSettings(ctx context.Context, s store.Store, runID string, st settings) error {
	st.Format = settingsFormat
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := s.AppendConversation(ctx, settingsKey(runID), runID, []llm.Message{llm.UserText(string(b))}); err != nil {
		return fmt.Errorf("save the run's settings: %w", err)
	}
	return nil
}

// loadSettings returns the settings of a run, and false when it has none
// (a run started by another program).
func loadSettings(ctx context.Context, s store.Store, runID string) (settings, bool, error) {
	msgs, err := s.History(ctx, settingsKey(runID))
	if err != nil || len(msgs) == 0 {
		return settings{}, false, err
	}
	var st settings
	if err := json.Unmarshal([]byte(msgs[0].Text()), &st); err != nil {
		return settings{}, false, fmt.Errorf("the settings of run %s are unreadable: %w", runID, err)
	}
	if st.Format != settingsFormat {
		return settings{}, false, fmt.Errorf("the settings of run %s are format %d; this loom reads format %d", runID, st.Format, settingsFormat)
	}
	return st, true, nil
}
