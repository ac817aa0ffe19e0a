package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/store"
)

// settingsFormat is the format of the settings loom keeps with each run,
// in the run's store.RunHeader.Meta. Format 1 was kept in a one-message
// conversation named after the run (settingsKey) and held the system
// prompt too; it is still read, for runs saved that way.
const settingsFormat = 2

// settings are what loom resume needs to rebuild the agent of a run the
// way it was: the agent refuses to resume a run under another model name,
// system prompt, toolset or turn budget, and the store keeps only the
// model's name. No secret is kept: keys come from the environment again.
// The system prompt is read back from the run's journal
// (agent.StartConfig) rather than kept twice.
type settings struct {
	Format  int    `json:"format"`
	Model   string `json:"model"`              // as given: "openai:gpt-4o"
	BaseURL string `json:"base_url,omitempty"` // as resolved, without userinfo
	// BaseURLAuth says the base URL had credentials (userinfo), which
	// are not kept: resuming the run needs them again.
	BaseURLAuth bool     `json:"base_url_auth,omitempty"`
	Workspace   string   `json:"workspace"`             // absolute
	System      string   `json:"system,omitempty"`      // format 1 only: the whole system prompt sent
	SystemFlag  string   `json:"system_flag,omitempty"` // --system as given
	MaxTurns    int      `json:"max_turns"`
	MCP         []string `json:"mcp,omitempty"`         // --mcp values
	ProjectMCP  bool     `json:"project_mcp,omitempty"` // the .mcp.json servers were started
	Graceful    bool     `json:"graceful,omitempty"`    // the last allowed turn is tool-free
	// Sandbox is --sandbox; "" (settings saved before loom had one) is
	// off, the way those runs started.
	Sandbox  string   `json:"sandbox,omitempty"`
	Network  bool     `json:"allow_network,omitempty"` // --allow-network
	Writable []string `json:"sandbox_write,omitempty"` // --sandbox-write values
}

// meta returns st as a run's store metadata.
func (st settings) meta() (json.RawMessage, error) {
	st.Format = settingsFormat
	st.System = ""
	return json.Marshal(st)
}

// settingsKey names the conversation that held a run's format-1 settings.
func settingsKey(runID string) string { return "loom-cli/settings/" + runID }

// loadSettings returns the settings of a run, and false when it has none
// (a run started by another program). For a run of this format the
// system prompt comes from its journal.
func loadSettings(ctx context.Context, s store.Store, info store.RunInfo) (settings, bool, error) {
	st, ok, err := parseSettings(ctx, s, info)
	if err != nil || !ok || st.Format == 1 {
		return st, ok, err
	}
	cfg, err := agent.StartConfig(ctx, s, info.ID)
	if err != nil {
		return settings{}, false, fmt.Errorf("the journal of run %s is unreadable: %w", info.ID, err)
	}
	st.System = cfg.System
	return st, true, nil
}

// parseSettings reads the settings of a run without its system prompt.
func parseSettings(ctx context.Context, s store.Store, info store.RunInfo) (settings, bool, error) {
	raw := []byte(info.Meta)
	if len(raw) == 0 {
		msgs, err := s.History(ctx, settingsKey(info.ID))
		if err != nil || len(msgs) == 0 {
			return settings{}, false, err
		}
		raw = []byte(msgs[0].Text())
	}
	var st settings
	if err := json.Unmarshal(raw, &st); err != nil {
		return settings{}, false, fmt.Errorf("the settings of run %s are unreadable: %w", info.ID, err)
	}
	wantFormat := settingsFormat
	if len(info.Meta) == 0 {
		wantFormat = 1
	}
	if st.Format != wantFormat {
		return settings{}, false, fmt.Errorf("the settings of run %s are format %d; this loom reads format %d there", info.ID, st.Format, wantFormat)
	}
	return st, true, nil
}
