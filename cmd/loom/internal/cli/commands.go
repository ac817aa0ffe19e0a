package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/loomkit/loom/store"
)

// runCmd is "loom run [flags] PROMPT": one run, non-interactive.
func (a *app) runCmd(args []string) error {
	o := &options{set: map[string]bool{}}
	fs := agentFlags("run", o, true)
	pos, err := parse(fs, args, o.set)
	if errors.Is(err, flag.ErrHelp) {
		return a.helpCmd([]string{"run"})
	}
	if err != nil {
		return err
	}
	prompt, err := a.promptOf(pos)
	if err != nil {
		return err
	}
	if prompt == "" {
		return usagef("Give the task as an argument: loom run \"fix the failing test\" (or - to read it from standard input).", "loom run needs a PROMPT")
	}
	if o.temporal != "" {
		return a.temporalRun(o, prompt)
	}
	ctx, stop := a.signals(context.Background(), nil)
	defer stop()
	s, err := a.newSession(ctx, o, sessionConfig{})
	if err != nil {
		return err
	}
	defer s.close()
	_, err = s.start(ctx, prompt, "", nil)
	return err
}

// promptOf joins the positional arguments into a prompt; "-" reads it
// from standard input.
func (a *app) promptOf(pos []string) (string, error) {
	prompt := strings.TrimSpace(strings.Join(pos, " "))
	if prompt == "-" {
		p, err := stdinPrompt(a.env.Stdin)
		if err != nil {
			return "", usagef("", "cannot read the prompt from standard input: %v", err)
		}
		return p, nil
	}
	return prompt, nil
}

// resumeCmd is "loom resume RUN_ID [PROMPT]": continue a stored run, then
// (or, for a finished run, instead) run PROMPT in its conversation.
func (a *app) resumeCmd(args []string) error {
	o := &options{set: map[string]bool{}}
	fs := agentFlags("resume", o, false)
	pos, err := parse(fs, args, o.set)
	if errors.Is(err, flag.ErrHelp) {
		return a.helpCmd([]string{"resume"})
	}
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("Give the id of a run: loom resume RUN_ID [PROMPT] (loom runs lists them).", "loom resume needs a RUN_ID")
	}
	prompt, err := a.promptOf(pos[1:])
	if err != nil {
		return err
	}
	ctx, stop := a.signals(context.Background(), nil)
	defer stop()

	st, err := openStore(o.storePath)
	if err != nil {
		return err
	}
	info, err := findRun(ctx, st, pos[0])
	if err != nil {
		st.Close()
		return err
	}
	saved, ok, err := loadSettings(ctx, st, info)
	if err != nil {
		st.Close()
		return usagef("", "%v", err)
	}
	st.Close()
	if ok {
		saved.apply(o)
		if saved.BaseURLAuth && !o.set["base-url"] {
			if err := a.credentialsAgain(o, info.ID); err != nil {
				return err
			}
		}
	}
	sc := sessionConfig{}
	if ok {
		sc.projectMCP = &saved.ProjectMCP
	}
	s, err := a.newSession(ctx, o, sc)
	if err != nil {
		return err
	}
	defer s.close()
	system := saved.System
	if !ok || o.set["system"] {
		system = systemPrompt(o.system, s.ws, s.instructions)
	}

	switch info.Status {
	case store.StatusDone:
		if prompt == "" {
			_, err := s.resume(ctx, info.ID, info.ConversationID, system) // shows its answer again
			return err
		}
	case store.StatusFailed:
		if prompt == "" {
			return &usageError{
				msg:  fmt.Sprintf("run %s failed (%s); it cannot go on", info.ID, info.Error),
				hint: fmt.Sprintf("Continue its conversation with a new prompt: loom resume %s \"...\"", info.ID),
			}
		}
	default: // running, interrupted, waiting for approval
		if info.Owner != "" && info.Owner != s.owner {
			if !ownerGone(info.Owner) {
				return fmt.Errorf("run %s is being driven by another loom (%s): wait for it to end, or stop that process first", info.ID, info.Owner)
			}
			// The process that held the run was killed: take it over now
			// rather than wait for its claim to lapse.
			if err := s.st.Release(ctx, info.ID, info.Owner); err != nil && !errors.Is(err, store.ErrClaimed) {
				return fmt.Errorf("cannot take over run %s from the stopped process %s: %w", info.ID, info.Owner, err)
			}
		}
		if _, err := s.resume(ctx, info.ID, info.ConversationID, system); err != nil || prompt == "" {
			return err
		}
	}
	// A new run of prompt in the run's conversation.
	_, err = s.start(ctx, prompt, info.ConversationID, nil)
	return err
}

// apply fills the options the command line did not set from a run's
// settings, so that the run resumes under the agent it was started with.
func (st settings) apply(o *options) {
	if !o.set["model"] {
		o.model = st.Model
	}
	if !o.set["base-url"] {
		o.baseURL = st.BaseURL
	}
	if !o.set["workspace"] {
		o.workspace = st.Workspace
	}
	if !o.set["max-turns"] && st.MaxTurns > 0 {
		o.maxTurns = st.MaxTurns
	}
	if !o.set["system"] {
		o.system = st.SystemFlag
	}
	if !o.set["mcp"] {
		o.mcp = st.MCP
	}
	if !o.set["sandbox"] {
		o.sandbox = cmp.Or(st.Sandbox, "off")
	}
	if !o.set["allow-network"] {
		o.network = st.Network
	}
	if !o.set["sandbox-write"] {
		o.writable = st.Writable
	}
	o.graceful = st.Graceful
}

// credentialsAgain gives o, resuming a run started with credentials in
// its base URL (which loom does not keep), the base URL with them: from
// the provider's base URL variable when it names the same URL with
// credentials, else nowhere: the user must give --base-url again.
func (a *app) credentialsAgain(o *options, runID string) error {
	spec := o.model
	if spec == "" {
		spec = a.env.Getenv("LOOM_MODEL")
	}
	if ms, err := parseModel(spec); err == nil && ms.p.baseURLVar != "" {
		env := a.env.Getenv(ms.p.baseURLVar)
		if bare, had := withoutUserinfo(env); had && strings.TrimRight(bare, "/") == strings.TrimRight(o.baseURL, "/") {
			o.baseURL = env
			return nil
		}
	}
	return usagef(fmt.Sprintf("Give it again: loom resume --base-url 'https://USER:PASSWORD@%s' %s", strings.TrimPrefix(strings.TrimPrefix(o.baseURL, "https://"), "http://"), runID),
		"run %s was started with credentials in its base URL, which loom does not keep", runID)
}

// findRun returns the run whose id is id, or the only one whose id starts
// with it.
func findRun(ctx context.Context, st store.Store, id string) (store.RunInfo, error) {
	info, err := st.Get(ctx, id)
	if err == nil {
		return info, nil
	}
	notFound := usagef("List the stored runs with: loom runs", "no run %q in the store", id)
	if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrInvalid) {
		return store.RunInfo{}, usagef("", "cannot read run %q: %v", id, err)
	}
	if len(id) < 6 {
		return store.RunInfo{}, notFound
	}
	all, err := st.List(ctx, store.Filter{})
	if err != nil {
		return store.RunInfo{}, usagef("", "cannot list runs: %v", err)
	}
	var match []store.RunInfo
	for _, r := range all {
		if strings.HasPrefix(r.ID, id) || strings.HasPrefix(r.ID, "run_"+id) {
			match = append(match, r)
		}
	}
	switch len(match) {
	case 0:
		return store.RunInfo{}, notFound
	case 1:
		return match[0], nil
	}
	return store.RunInfo{}, usagef("Give more of the id.", "%d runs start with %q", len(match), id)
}
