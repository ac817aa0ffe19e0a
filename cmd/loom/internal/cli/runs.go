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
	"github.com/loomkit/loom/temporal"
)

// runsCmd is "loom runs": the stored runs, newest first.
func (a *app) runsCmd(args []string) error {
	fs := flag.NewFlagSet("runs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	storePath := fs.String("store", "", storeUsage)
	temporalAddr := fs.String("temporal", "", "list the runs on the Temporal server at HOST:PORT instead (started with loom run --temporal)")
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
	ctx := context.Background()
	var rows []runRow
	where := ""
	if *temporalAddr != "" {
		if *storePath != "" {
			return usagef("", "--store and --temporal name two places to list runs from: give one")
		}
		where = "on the Temporal server at " + *temporalAddr
		if rows, err = a.temporalRuns(ctx, *temporalAddr, *limit); err != nil {
			return err
		}
	} else {
		st, err := openStore(*storePath)
		if err != nil {
			return err
		}
		defer st.Close()
		where = "in " + st.where
		if rows, err = storedRuns(ctx, st, *limit); err != nil {
			return err
		}
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
		fmt.Fprintf(a.env.Stderr, "no runs %s yet\n", where)
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tSTARTED\tTURNS\tMODEL\tPROMPT")
	for _, r := range rows {
		turns := "-"
		if r.Turns != nil {
			turns = strconv.Itoa(*r.Turns)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Started.Local().Format("2006-01-02 15:04"),
			turns, r.Model, oneLine(r.Prompt, 60))
	}
	return tw.Flush()
}

// runRow is a line of loom runs. Turns is nil where it is not known (runs
// on Temporal, whose listing does not count them).
type runRow struct {
	ID      string    `json:"id"`
	Status  string    `json:"status"`
	Started time.Time `json:"started"`
	Turns   *int      `json:"turns,omitempty"`
	Model   string    `json:"model"`
	Prompt  string    `json:"prompt"`
	Error   string    `json:"error,omitempty"`
}

// storedRuns are the newest runs of st.
func storedRuns(ctx context.Context, st store.Store, limit int) ([]runRow, error) {
	runs, err := st.List(ctx, store.Filter{Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("cannot list runs: %w", err)
	}
	rows := make([]runRow, len(runs))
	for i, r := range runs {
		status := string(r.Status)
		if r.Status == store.StatusRunning && ownerGone(r.Owner) {
			status = string(store.StatusInterrupted)
		}
		modelName := r.Model
		if saved, ok, err := parseSettings(ctx, st, r); err == nil && ok {
			modelName = saved.Model
		}
		rows[i] = runRow{ID: r.ID, Status: status, Started: r.Created, Turns: &r.Turns, Model: modelName, Prompt: r.Prompt, Error: r.Error}
	}
	return rows, nil
}

// temporalRuns are the newest runs on the Temporal server at addr.
func (a *app) temporalRuns(ctx context.Context, addr string, limit int) ([]runRow, error) {
	c, err := a.dialTemporal(ctx, addr, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	runs, err := temporal.List(ctx, c, limit)
	if err != nil {
		return nil, fmt.Errorf("cannot list the runs on %s: %w", addr, err)
	}
	rows := make([]runRow, len(runs))
	for i, r := range runs {
		rows[i] = runRow{ID: r.ID, Status: r.Status, Started: r.Started, Model: r.Model, Prompt: r.Prompt}
	}
	return rows, nil
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
