package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/cmd/loom/internal/ui"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomotel"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store/sqlite"
	"github.com/loomkit/loom/temporal"
	"github.com/loomkit/loom/tool"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

// The Temporal commands are thin wrappers over package temporal:
//
//	loom worker --temporal HOST:PORT     runs the workflow and its activities
//	loom run --temporal HOST:PORT ...    starts a run and shows its progress
//	loom approve --temporal HOST:PORT RUN_ID [DECISION...]
//
// The workflow asks for approval as the in-process agent does (by spec,
// and per call for tools that judge their arguments); loom run --temporal
// approves what waits with --yes, and otherwise leaves it to loom approve.

// dialTemporal connects to the Temporal server at addr. With tr (nil for
// none), the client and the workers made with it trace what they do and
// carry the trace context through Temporal.
func (a *app) dialTemporal(ctx context.Context, addr string, tr *tracing) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	logger := slog.New(a.red.Handler(slog.NewTextHandler(a.env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	opts := client.Options{HostPort: addr, Logger: tlog.NewStructuredLogger(logger)}
	if tr != nil {
		ic, err := tr.temporalInterceptor()
		if err != nil {
			return nil, fmt.Errorf("cannot trace Temporal calls: %w", err)
		}
		opts.Interceptors = append(opts.Interceptors, ic)
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, usagef("Start one with: temporal server start-dev, or give --temporal the address of yours.", "cannot reach the Temporal server at %s: %v", addr, err)
	}
	return c, nil
}

// blobsDir is where the workers of this machine keep run transcripts.
func blobsDir() (string, error) {
	p, err := sqlite.DefaultPath()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(p), "temporal-blobs"), nil
}

// workerCmd is "loom worker --temporal HOST:PORT".
func (a *app) workerCmd(args []string) error {
	o := &options{set: map[string]bool{}}
	fs := workerFlags(o)
	pos, err := parse(fs, args, o.set)
	if errors.Is(err, flag.ErrHelp) {
		return a.helpCmd([]string{"worker"})
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("Run 'loom help worker'.", "loom worker takes no arguments (got %q)", pos[0])
	}
	if o.temporal == "" {
		return usagef("Give the server: loom worker --temporal 127.0.0.1:7233", "loom worker needs --temporal HOST:PORT")
	}
	spec := o.model
	if spec == "" {
		spec = a.env.Getenv("LOOM_MODEL")
	}
	ms, err := parseModel(spec)
	if err != nil {
		return err
	}
	base, key, err := endpoint(ms, o.baseURL, a.env.Getenv)
	if err != nil {
		return err
	}
	a.addEndpoint(base, key)
	ws, err := workspaceDir(o.workspace)
	if err != nil {
		return err
	}
	tb, err := openToolbox(ws, o.shellSandbox())
	if err != nil {
		return err
	}
	defer tb.close()
	ctx, stop := a.signals(context.Background(), nil)
	defer stop()
	tr, err := startTracing(ctx, a.env.Getenv, ms.provider, a.red)
	if err != nil {
		return err
	}
	defer tr.shutdown() // after the worker stopped: its last spans are sent
	tools := tb.coding()
	m := newModel(ms, base, key, a.red)
	if tr != nil {
		for i, t := range tools {
			tools[i] = loomotel.Tool(tr.opts...)(t)
		}
		m = loomotel.Model(tr.opts...)(m)
	}
	set, err := tool.NewSet(tools...)
	if err != nil {
		return err
	}
	blobs, err := openBlobs(o.blobs)
	if err != nil {
		return err
	}
	defer blobs.close()
	c, err := a.dialTemporal(ctx, o.temporal, tr)
	if err != nil {
		return err
	}
	defer c.Close()
	queue := queueOf(o)
	if err := a.checkBlobsShared(ctx, c, queue, blobs); err != nil {
		return err
	}
	w, err := temporal.NewWorker(c, temporal.Registry{
		Models: map[string]model.Model{ms.spec: m},
		Tools:  set,
		Blobs:  blobs.Blobs,
	}, &temporal.WorkerOptions{TaskQueue: queue, Worker: worker.Options{Identity: workerIdentity(queue, blobs.kind)}})
	if err != nil {
		return fmt.Errorf("cannot make the worker: %w", err)
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("the worker did not start: %w", err)
	}
	fmt.Fprintf(a.env.Stderr, "loom worker: task queue %q on %s · model %s · %d tools in %s · blobs in %s\n", queue, o.temporal, ms.spec, set.Len(), tb.files.Dir(), blobs.where)
	<-ctx.Done()
	w.Stop()
	return &exitError{code: ExitInterrupted}
}

func queueOf(o *options) string {
	if o.queue != "" {
		return o.queue
	}
	return temporal.DefaultQueue
}

// temporalRun is "loom run --temporal HOST:PORT PROMPT": start a run on
// Temporal and follow it to its end.
func (a *app) temporalRun(o *options, prompt string) error {
	if len(o.mcp) > 0 {
		return usagef("Run MCP servers' tools in process (without --temporal).", "--mcp cannot be used with --temporal: the workers offer the coding tools only")
	}
	spec := o.model
	if spec == "" {
		spec = a.env.Getenv("LOOM_MODEL")
	}
	ms, err := parseModel(spec)
	if err != nil {
		return err
	}
	ws, err := workspaceDir(o.workspace)
	if err != nil {
		return err
	}
	tb, err := openToolbox(ws, o.shellSandbox()) // to judge calls the way the worker's tools do
	if err != nil {
		return err
	}
	defer tb.close()
	s := &session{a: a, o: o, ms: ms, ws: tb.files.Dir(), tb: tb}
	s.setSink()
	defer func() {
		if s.text != nil {
			s.text.Close()
		}
	}()
	instructions, warnings := readInstructions(s.ws)
	for _, w := range warnings {
		s.warn(w)
	}
	ctx, stop := a.signals(context.Background(), nil)
	defer stop()
	tr, err := startTracing(ctx, a.env.Getenv, ms.provider, a.red)
	if err != nil {
		return err
	}
	defer tr.shutdown()
	c, err := a.dialTemporal(ctx, o.temporal, tr)
	if err != nil {
		return err
	}
	defer c.Close()

	var names []string
	for _, t := range tb.coding() {
		names = append(names, t.Spec().Name)
	}
	in := temporal.Input{
		Model: ms.spec,
		Tools: names,
		Run: run.Config{
			Model:    ms.name,
			System:   systemPrompt(o.system, s.ws, instructions),
			Prompt:   llm.UserText(prompt),
			MaxTurns: run.Turns(o.maxTurns),
		},
	}
	id := "run_" + newID()
	// The run's span, a client span: the workers' spans of the run are
	// its descendants through the trace context Temporal carries.
	end := func(llm.Usage, error) {}
	if tr != nil {
		var rr *loomotel.RemoteRun
		ctx, rr = loomotel.StartRemoteRun(ctx, id, tr.opts...)
		end = rr.End
	}
	h, err := temporal.Start(ctx, c, in, client.StartWorkflowOptions{ID: id, TaskQueue: queueOf(o)})
	if err != nil {
		end(llm.Usage{}, err)
		return usagef("", "cannot start the run on Temporal: %v", err)
	}
	s.sink.Start(h.WorkflowID, ms.spec, false)
	calls := map[string]llm.ToolCall{}
	cancelled := false
	for ev, err := range h.Progress(context.WithoutCancel(ctx), nil) {
		if err != nil {
			end(llm.Usage{}, err)
			s.sink.Fail(id, err, false)
			return &exitError{code: ExitFailed}
		}
		if ctx.Err() != nil && !cancelled {
			cancelled = true
			h.Cancel(context.WithoutCancel(ctx))
		}
		switch ev.Kind {
		case temporal.EventModelAnswer:
			if len(ev.Calls) > 0 && ev.Text != "" { // the final answer is shown whole, from the result
				s.sink.Event(agent.TextDelta{Turn: ev.Turn, Text: ev.Text})
			}
		case temporal.EventApproval:
			a.decide(ctx, s, h, o, ev.Pending, calls)
		case temporal.EventDecision:
			if ev.Decision != nil {
				s.sink.Event(agent.ApprovalDecided{Turn: ev.Turn, Call: calls[ev.Decision.CallID], Decision: *ev.Decision})
			}
		case temporal.EventToolCall:
			if ev.Call != nil {
				calls[ev.Call.ID] = *ev.Call
				s.sink.Event(agent.ToolCall{Turn: ev.Turn, Call: *ev.Call})
			}
		case temporal.EventToolResult:
			if ev.Result != nil {
				s.sink.Event(agent.ToolResult{Turn: ev.Turn, Call: calls[ev.Result.CallID], Result: *ev.Result})
			}
		}
	}
	res, err := h.Result(context.WithoutCancel(ctx))
	end(res.Usage, err)
	if err != nil {
		var ce *temporal.CancelledError
		if errors.As(err, &ce) {
			s.sink.Fail(id, errInterrupted, false)
			return &exitError{code: ExitInterrupted}
		}
		s.sink.Fail(id, err, false)
		return &exitError{code: ExitFailed}
	}
	if res.Output != "" {
		s.sink.Event(agent.TextDelta{Text: res.Output})
	}
	s.sink.Done(agent.Result{RunID: id, Output: res.Output, Message: res.Message, Messages: res.Messages, Usage: res.Usage, Calls: res.Calls})
	return nil
}

// decide answers an approval request of a run on Temporal: with --yes
// every call is approved; without it they wait for loom approve.
func (a *app) decide(ctx context.Context, s *session, h *temporal.Handle, o *options, pending []run.PendingCall, calls map[string]llm.ToolCall) {
	var ds []run.Decision
	var waiting []string
	for _, p := range pending {
		calls[p.Call.ID] = p.Call
		if o.yes {
			ds = append(ds, run.Decision{CallID: p.Call.ID, Action: run.Approved})
		} else {
			waiting = append(waiting, p.Call.ID)
		}
	}
	if len(ds) > 0 {
		if _, err := h.Approve(context.WithoutCancel(ctx), ds); err != nil {
			s.warn(fmt.Sprintf("sending approvals: %v", err))
		}
	}
	if len(waiting) > 0 {
		s.warn(fmt.Sprintf("the run waits for approval of %s; decide with: loom approve --temporal %s %s [CALL_ID=deny:REASON ...]",
			strings.Join(waiting, ", "), o.temporal, h.WorkflowID))
	}
}

// approveCmd is "loom approve --temporal HOST:PORT RUN_ID [CALL_ID...]".
func (a *app) approveCmd(args []string) error {
	fs := flag.NewFlagSet("approve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("temporal", "", "the Temporal server, as HOST:PORT")
	deny := fs.Bool("deny", false, "deny the calls instead of approving them")
	reason := fs.String("reason", "", "why they are denied (the model reads it)")
	pos, err := parse(fs, args, nil)
	if errors.Is(err, flag.ErrHelp) {
		return a.helpCmd([]string{"approve"})
	}
	if err != nil {
		return err
	}
	if *addr == "" || len(pos) == 0 {
		return usagef("Run 'loom help approve'.", "loom approve needs --temporal HOST:PORT and a RUN_ID")
	}
	ctx, stop := a.signals(context.Background(), nil)
	defer stop()
	c, err := a.dialTemporal(ctx, *addr, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	h := temporal.Attach(c, pos[0])
	st, err := h.Status(ctx)
	if err != nil {
		return fmt.Errorf("cannot ask run %s where it is: %w", pos[0], err)
	}
	// Explicit decisions (CALL_ID=deny:REASON, ...), bare call ids, or
	// nothing: every call that waits.
	decided := map[string]bool{}
	for _, d := range st.Decided {
		decided[d.CallID] = true
	}
	waits := map[string]bool{}
	for _, p := range st.Approvals {
		if !decided[p.Call.ID] {
			waits[p.Call.ID] = true
		}
	}
	if len(waits) == 0 {
		return usagef("", "run %s waits for no approval (it is in state %s)", pos[0], st.State)
	}
	defaultDecision := func(id string) run.Decision {
		d := run.Decision{CallID: id, Action: run.Approved}
		if *deny {
			d.Action, d.Reason = run.Denied, *reason
			if d.Reason == "" {
				d.Reason = "the user said no"
			}
		}
		return d
	}
	var ds []run.Decision
	for _, arg := range pos[1:] {
		d := defaultDecision(arg)
		if strings.Contains(arg, "=") {
			if d, err = temporal.ParseDecision(arg); err != nil {
				return usagef("Give decisions as CALL_ID, CALL_ID=approve, CALL_ID=deny:REASON, CALL_ID=abort:REASON or CALL_ID=edit:{...}.", "%v", err)
			}
		}
		if !waits[d.CallID] {
			return usagef("", "run %s does not wait for a decision about call %q", pos[0], d.CallID)
		}
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		for _, p := range st.Approvals {
			if waits[p.Call.ID] {
				ds = append(ds, defaultDecision(p.Call.ID))
			}
		}
	}
	res, err := h.Approve(ctx, ds)
	if err != nil {
		return fmt.Errorf("the run refused the decisions: %w", err)
	}
	out, _ := json.Marshal(ds)
	fmt.Fprintf(a.env.Stderr, "sent %d decision(s) to %s: %s\n", len(ds), pos[0], ui.Sanitize(string(out)))
	if len(res.Waiting) > 0 {
		fmt.Fprintf(a.env.Stderr, "still waiting for: %s\n", strings.Join(res.Waiting, ", "))
	}
	return nil
}
