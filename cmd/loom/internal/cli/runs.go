package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loomkit/loom/store"
)

// runsCmd is "loom runs": the stored runs, newest first.
func (a *app) runsCmd(args []string) error {
	fs := flag.NewFlagSet("runs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	storePath := fs.String("store", "", "the SQLite file runs are checkpointed to (default: $XDG_STATE_HOME/loom/loom.db)")
	limit := fs.Int("limit", 20, "show at most this many runs (0: all)")
	var output outputFlag = "text"
	fs.Var(&output, "output", "text or jsonl (one JSON object per run)")
	pos, err := parse(fs, args, nil)
	if errors.Is(err, flag.ErrHelp) {
		return a.helpCmd([]string{"runs"})
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("Run 'loom help runs' for its flags.", "loom runs takes no arguments (got %q)", pos[0])
	}
	if *limit < 0 {
		return usagef("", "--limit %d is negative", *limit)
	}
	st, err := openStore(*storePath)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := context.Background()
	runs, err := st.List(ctx, store.Filter{Limit: *limit})
	if err != nil {
		return fmt.Errorf("cannot list runs: %w", err)
	}
	type row struct {
		ID      string    `json:"id"`
		Status  string    `json:"status"`
		Started time.Time `json:"started"`
		Turns   int       `json:"turns"`
		Model   string    `json:"model"`
		Prompt  string    `json:"prompt"`
		Error   string    `json:"error,omitempty"`
	}
	rows := make([]row, len(runs))
	for i, r := range runs {
		status := string(r.Status)
		if r.Status == store.StatusRunning && ownerGone(r.Owner) {
			status = string(store.StatusInterrupted)
		}
		modelName := r.Model
		if saved, ok, err := parseSettings(ctx, st, r); err == nil && ok {
			modelName = saved.Model
		}
		rows[i] = row{ID: r.ID, Status: status, Started: r.Created, Turns: r.Turns, Model: modelName, Prompt: r.Prompt, Error: r.Error}
	}
	out := a.env.Stdout
	if output == "jsonl" {
		enc := json.NewEncoder(out)
		for _, r := range rows {
			enc.Encode(r)
		}
		return nil
	}
	if len(rows) == 0 {
		fmt.Fprintf(a.env.Stderr, "no runs in %s yet\n", st.Path())
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tSTARTED\tTURNS\tMODEL\tPROMPT")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Started.Local().Format("2006-01-02 15:04"),
			strconv.Itoa(r.Turns), r.Model, oneLine(r.Prompt, 60))
	}
	return tw.Flush()
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
