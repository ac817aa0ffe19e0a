package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/store"
)

// Settings live in the run's metadata, with the system prompt read back
// from its journal; runs saved with format-1 settings (a conversation of
// their own, system prompt included) still load.
func TestSettingsRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	want := settings{Model: "openai:m", Workspace: "/w", System: "You are loom.\nUse tabs.", SystemFlag: "x", MaxTurns: 7, Sandbox: "require", Network: true, Writable: []string{"/cache"}}
	meta, err := want.meta()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(meta), "Use tabs") {
		t.Errorf("the metadata repeats the system prompt: %s", meta)
	}
	a := agent.New(agent.Config{Model: modeltest.NewScript(modeltest.Text("ok")), Store: st, System: want.System})
	res, err := a.Run(ctx, agent.Input{Prompt: llm.UserText("hi"), Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Get(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := loadSettings(ctx, st, info)
	want.Format = settingsFormat
	if err != nil || !ok || got.System != want.System || got.Model != want.Model || got.Sandbox != "require" || !got.Network || got.MaxTurns != 7 ||
		len(got.Writable) != 1 || got.Writable[0] != "/cache" {
		t.Fatalf("loadSettings = %+v, %v, %v; want %+v", got, ok, err, want)
	}

	// Format 1: another run, its settings in the old place.
	res, err = agent.New(agent.Config{Model: modeltest.NewScript(modeltest.Text("ok")), Store: st}).Run(ctx, agent.Prompt("old"))
	if err != nil {
		t.Fatal(err)
	}
	old := `{"format":1,"model":"anthropic:m","workspace":"/old","system":"Old prompt.","max_turns":3}`
	if err := st.AppendConversation(ctx, settingsKey(res.RunID), res.RunID, []llm.Message{llm.UserText(old)}); err != nil {
		t.Fatal(err)
	}
	info, _ = st.Get(ctx, res.RunID)
	got, ok, err = loadSettings(ctx, st, info)
	if err != nil || !ok || got.System != "Old prompt." || got.Model != "anthropic:m" || got.Sandbox != "" {
		t.Fatalf("format 1: %+v, %v, %v", got, ok, err)
	}

	// A run of another program has none; a wrong format is an error.
	res, _ = agent.New(agent.Config{Model: modeltest.NewScript(modeltest.Text("ok"), modeltest.Text("ok")), Store: st}).Run(ctx, agent.Prompt("other"))
	info, _ = st.Get(ctx, res.RunID)
	if _, ok, err := loadSettings(ctx, st, info); ok || err != nil {
		t.Fatalf("a run without settings: %v, %v", ok, err)
	}
	info.Meta = `{"format":9}`
	if _, _, err := loadSettings(ctx, st, info); err == nil || !strings.Contains(err.Error(), "format 9") {
		t.Fatalf("format 9: %v", err)
	}
}
