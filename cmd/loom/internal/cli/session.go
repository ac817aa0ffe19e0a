package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/cmd/loom/internal/ui"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomotel"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/tool/mcp"
)

var errInterrupted = ui.ErrInterrupted

// claimTTL is how long loom's claim on a run it drives lasts unless renewed.
const claimTTL = 30 * time.Minute

// notApproved is what the model reads when a call needing approval is
// denied because nobody can be asked.
const notApproved = agent.NotApproved + " (loom is running non-interactively; the user can allow such calls with --yes)"

// session is everything the runs of one loom command share: the model,
// the workspace and its tools, the store, the output and the approver.
type session struct {
	a    *app
	o    *options
	ms   modelSpec
	base string
	key  string
	ws   string // absolute, symbolic links resolved
	st   store.Store
	tb   *toolbox

	instructions string
	projectMCP   bool // the .mcp.json servers were started

	sink     ui.Sink
	text     *ui.Text // the sink, in text mode
	approver agent.Approver
	owner    string
	retry    model.RetryPolicy
	trace    *tracing // nil: no trace export
}

// sessionConfig says how a session treats what needs a person.
type sessionConfig struct {
	// trustProject decides whether to start the servers of the
	// workspace's .mcp.json; nil means only with --yes.
	trustProject func(servers []mcp.ServerConfig) bool
	// approver is used instead of the one the flags choose.
	approver func(s *session) agent.Approver
	// projectMCP, when set, says whether to start the .mcp.json servers,
	// whatever the flags say: a resumed run must get the tools it had.
	projectMCP *bool
}

// newSession checks the configuration in the order a person fixes it
// (flags, model and key, workspace, store) and opens what the runs need.
// Every problem with the configuration is a usage error: exit status 2.
func (a *app) newSession(ctx context.Context, o *options, sc sessionConfig) (_ *session, err error) {
	getenv := a.env.Getenv
	spec := o.model
	if spec == "" {
		spec = getenv("LOOM_MODEL")
	}
	ms, err := parseModel(spec)
	if err != nil {
		return nil, err
	}
	base, key, err := endpoint(ms, o.baseURL, getenv)
	if err != nil {
		return nil, err
	}
	a.addEndpoint(base, key)
	ws, err := workspaceDir(o.workspace)
	if err != nil {
		return nil, err
	}
	st, err := openStore(o.storePath)
	if err != nil {
		return nil, err
	}
	s := &session{a: a, o: o, ms: ms, base: base, key: key, st: st, owner: newOwner()}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.tb, err = openToolbox(ws, o.shellSandbox()); err != nil {
		return nil, err
	}
	if s.trace, err = startTracing(ctx, getenv, ms.provider, a.red); err != nil {
		return nil, err
	}
	s.ws = s.tb.files.Dir()
	plan, err := planMCP(s.ws, o.mcp, getenv)
	if err != nil {
		return nil, err
	}
	s.setSink()
	var warnings []string
	s.instructions, warnings = readInstructions(s.ws)
	warnings = append(warnings, plan.notes...)
	servers := plan.flags
	if len(plan.project) > 0 {
		trust := o.yes
		switch {
		case sc.projectMCP != nil:
			trust = *sc.projectMCP
		case !trust && sc.trustProject != nil:
			trust = sc.trustProject(plan.project)
		}
		if trust {
			servers = append(servers, plan.project...)
			s.projectMCP = true
		} else {
			names := make([]string, len(plan.project))
			for i, c := range plan.project {
				names[i] = c.Name
			}
			warnings = append(warnings, fmt.Sprintf("the MCP servers of %s (%s) were not started: they run commands the repository chose; pass --yes to start them",
				ProjectMCPFile, strings.Join(names, ", ")))
		}
	}
	for _, w := range warnings {
		s.warn(w)
	}
	for _, w := range s.tb.connectMCP(ctx, servers) {
		s.warn(w)
	}
	switch {
	case sc.approver != nil:
		s.approver = sc.approver(s)
	case o.yes:
		s.approver = agent.AllowAll
	default:
		s.approver = agent.DenyAll(notApproved)
	}
	return s, nil
}

func workspaceDir(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", usagef("Run loom in a directory that exists, or give --workspace.", "cannot find the current directory: %v", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", usagef("", "--workspace %q: %v", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", usagef("Give --workspace an existing directory.", "the workspace %s cannot be used: %v", abs, err)
	}
	if !fi.IsDir() {
		return "", usagef("Give --workspace a directory.", "the workspace %s is not a directory", abs)
	}
	return abs, nil
}

func (s *session) setSink() {
	if s.o.output == "jsonl" {
		s.sink = &ui.JSONL{W: s.a.env.Stdout, Redact: s.a.red}
		return
	}
	errTerm, outTerm := false, false
	if f, ok := fileOf(s.a.env.Stderr); ok {
		errTerm = ui.IsTerminal(f)
	}
	if f, ok := fileOf(s.a.env.Stdout); ok {
		outTerm = ui.IsTerminal(f)
	}
	// A pipe or a file gets the final answer alone; a terminal watches
	// the text arrive.
	s.text = &ui.Text{
		Out:     s.a.env.Stdout,
		Err:     s.a.env.Stderr,
		Color:   errTerm && ui.ColorAllowed(s.a.env.Getenv),
		Spinner: errTerm,
		Stream:  outTerm,
	}
	s.text.Hint = s.hint
	s.sink = s.text
}

// hint is advice about a failed run, in terms of loom's flags.
func (s *session) hint(err error) string {
	switch ui.Kind(err) {
	case "max_turns":
		return fmt.Sprintf("give a run more turns with --max-turns N (this one had %d)", s.o.maxTurns)
	case "auth", "permission":
		return fmt.Sprintf("check the key in %s", s.ms.p.keyVar)
	case "not_found":
		return fmt.Sprintf("check the model name (%s) and the base URL (%s)", s.ms.name, s.shownBase())
	case "network", "timeout":
		return fmt.Sprintf("check that %s is reachable", s.shownBase())
	}
	return ""
}

// shownBase is the base URL as loom shows and keeps it: without the
// credentials of its userinfo.
func (s *session) shownBase() string {
	b, _ := withoutUserinfo(s.base)
	return b
}

// warn says something about the configuration on stderr.
func (s *session) warn(msg string) {
	if s.text != nil {
		s.text.Line("yellow", "loom: "+msg)
		return
	}
	fmt.Fprintln(s.a.env.Stderr, "loom: "+msg)
}

func (s *session) close() {
	if s.text != nil {
		s.text.Close()
	}
	s.trace.shutdown()
	if s.tb != nil {
		s.tb.close()
	}
	if s.st != nil {
		s.st.Close()
	}
}

// newAgent returns the agent for one run with the tools as they are now.
func (s *session) newAgent(system string) (*agent.Agent, error) {
	set, err := s.tb.set()
	if err != nil {
		return nil, usagef("Rename the MCP server whose tool clashes with another tool.", "the tools cannot be offered: %v", err)
	}
	cfg := agent.Config{
		Model:     newModel(s.ms, s.base, s.key, s.a.red),
		ModelName: s.ms.name,
		System:    system,
		Tools:     set,
		MaxTurns:  agent.Limit(s.o.maxTurns),

		GracefulLastTurn: s.o.graceful,
		Approver:         s.approver,
		Retry:            s.retry,
		Store:            scrubStore{Store: s.st, red: s.a.red},
		Owner:            s.owner,
		// A claim must outlast the longest step (a 10-minute command or
		// model call) between renewals; a loom that was killed is noticed
		// at once by ownerGone, so the claim need not lapse quickly.
		ClaimTTL: claimTTL,
	}
	if s.trace != nil {
		cfg = loomotel.Instrument(cfg, s.trace.opts...)
	}
	return agent.New(cfg), nil
}

// settingsFor returns the settings to save with a run started with system.
func (s *session) settingsFor(system string) settings {
	base, creds := withoutUserinfo(s.base)
	return settings{
		Model:       s.ms.spec,
		BaseURL:     base,
		BaseURLAuth: creds,
		Workspace:   s.ws,
		System:      system,
		SystemFlag:  s.o.system,
		MaxTurns:    s.o.maxTurns,
		MCP:         s.o.mcp,
		ProjectMCP:  s.projectMCP,
		Graceful:    s.o.graceful,
		Sandbox:     s.o.sandbox,
		Network:     s.o.network,
		Writable:    s.o.writable,
	}
}

// start starts a new run of prompt in conversation conv (a new one when
// empty), with history before it (nil: the conversation's, from the
// store), and drives it to its end.
func (s *session) start(ctx context.Context, prompt, conv string, history []llm.Message) (agent.Result, error) {
	id := newID()
	if conv == "" {
		conv = "conv_" + id
	}
	runID := "run_" + id
	system := systemPrompt(s.o.system, s.ws, s.instructions)
	ag, err := s.newAgent(system)
	if err != nil {
		return agent.Result{}, err
	}
	meta, err := s.settingsFor(system).meta()
	if err != nil {
		return agent.Result{}, err
	}
	in := agent.Input{Prompt: llm.UserText(prompt), History: history, ConversationID: conv, RunID: runID, Meta: meta}
	var seq iter.Seq2[agent.Event, error]
	switch {
	case s.o.noStream:
		seq = blocking(func(on func(agent.Event)) error {
			in.OnEvent = on
			_, err := s.run(ctx, ag, in)
			return err
		})
	case s.trace != nil:
		seq = loomotel.Stream(ctx, ag, in, s.trace.opts...)
	default:
		seq = ag.Stream(ctx, in)
	}
	return s.drive(ctx, seq, runID, false)
}

// run runs in with ag, in a trace span when traces are exported.
func (s *session) run(ctx context.Context, ag *agent.Agent, in agent.Input) (agent.Result, error) {
	if s.trace != nil {
		return loomotel.Run(ctx, ag, in, s.trace.opts...)
	}
	return ag.Run(ctx, in)
}

// resume continues a stored run of conversation conv under system (the
// system prompt it was started with).
func (s *session) resume(ctx context.Context, runID, conv, system string) (agent.Result, error) {
	ag, err := s.newAgent(system)
	if err != nil {
		return agent.Result{}, err
	}
	res := agent.Resumption{RunID: runID}
	var opts []loomotel.Option
	if s.trace != nil {
		opts = append(slices.Clip(s.trace.opts), loomotel.WithConversationID(conv))
	}
	var seq iter.Seq2[agent.Event, error]
	switch {
	case s.o.noStream:
		seq = blocking(func(on func(agent.Event)) error {
			res.OnEvent = on
			var err error
			if s.trace != nil {
				_, err = loomotel.Resume(ctx, ag, res, opts...)
			} else {
				_, err = ag.Resume(ctx, res)
			}
			return err
		})
	case s.trace != nil:
		seq = loomotel.ResumeStream(ctx, ag, res, opts...)
	default:
		seq = ag.ResumeStream(ctx, res)
	}
	return s.drive(ctx, seq, runID, true)
}

// blocking adapts a blocking run reporting events to a callback to the
// shape of Stream.
func blocking(run func(on func(agent.Event)) error) iter.Seq2[agent.Event, error] {
	return func(yield func(agent.Event, error) bool) {
		if err := run(func(ev agent.Event) { yield(ev, nil) }); err != nil {
			yield(nil, err)
		}
	}
}

// drive renders a run's events and returns its result. A run that did
// not complete has been rendered (Fail) already: the error returned is
// an *exitError with the status to exit with, wrapping nothing; callers
// that need the agent's error get it from runErr.
func (s *session) drive(ctx context.Context, seq iter.Seq2[agent.Event, error], runID string, resumed bool) (agent.Result, error) {
	started, streamed := false, false
	for ev, err := range seq {
		if err != nil {
			var ce *agent.ConfigError
			if errors.As(err, &ce) && !started {
				return agent.Result{}, usagef("", "%v", err)
			}
			if !started {
				s.sink.Start(runID, s.ms.spec, resumed)
			}
			var re *agent.RunError
			resumable := errors.As(err, &re) && re.Snapshot != nil
			if errors.Is(err, agent.ErrSuspend) {
				resumable = true
			}
			s.sink.Fail(runID, err, resumable)
			code := ExitFailed
			if errors.Is(context.Cause(ctx), errInterrupted) {
				code = ExitInterrupted
			}
			return agent.Result{}, &runFailure{code: code, err: err}
		}
		switch ev := ev.(type) {
		case agent.RunStarted:
			runID, started = ev.RunID, true
			s.sink.Start(ev.RunID, s.ms.spec, ev.Resumed)
		case agent.TextDelta:
			streamed = true
			s.sink.Event(ev)
		case agent.Done:
			if !streamed && ev.Result.Output != "" {
				// A run that was done already is not played again: show
				// its answer.
				s.sink.Event(agent.TextDelta{Text: ev.Result.Output})
			}
			s.sink.Done(ev.Result)
			return ev.Result, nil
		default:
			s.sink.Event(ev)
		}
	}
	// The agent always ends with Done or an error; be explicit if not.
	err := errors.New("the run ended without a result")
	s.sink.Fail(runID, err, true)
	return agent.Result{}, &runFailure{code: ExitFailed, err: err}
}

// runFailure is a run that did not complete, already reported to the
// user; Main exits with code.
type runFailure struct {
	code int
	err  error
}

func (e *runFailure) Error() string { return e.err.Error() }
func (e *runFailure) Unwrap() error { return &exitError{code: e.code} }

// snapshotMessages returns the messages of the run in an *agent.RunError's
// snapshot (the run's own, its input excluded), or nil.
func snapshotMessages(err error) []llm.Message {
	var re *agent.RunError
	if !errors.As(err, &re) || re.Snapshot == nil {
		return nil
	}
	var snap struct {
		Run json.RawMessage `json:"run"`
	}
	if json.Unmarshal(re.Snapshot, &snap) != nil || snap.Run == nil {
		return nil
	}
	r := new(run.Run)
	if r.UnmarshalJSON(snap.Run) != nil {
		return nil
	}
	return r.Messages()
}

func newID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newOwner names this process in the store's claims, so that a later
// loom can tell that the process holding a claim is gone (see ownerGone).
func newOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("loom:%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
}

// stdinPrompt reads a prompt from r for "loom run -".
func stdinPrompt(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, 8<<20))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
