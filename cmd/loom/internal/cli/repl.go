package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/cmd/loom/internal/ui"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool/mcp"
)

const replHelp = `Type a request and press Enter; end a line with \ to continue it on the next.
  /new    start a new conversation
  /help   this help
  /exit   leave (or Ctrl-D)
Ctrl-C stops the running turn (the run is saved and the conversation goes on); twice leaves.
`

// interactiveCmd is "loom [flags]": a session of requests in one
// conversation, with approvals asked at the terminal.
func (a *app) interactiveCmd(args []string) error {
	o := &options{set: map[string]bool{}}
	fs := agentFlags("loom", o, false)
	pos, err := parse(fs, args, o.set)
	if errors.Is(err, flag.ErrHelp) {
		return a.helpCmd(nil)
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("For a one-shot run: loom run [flags] PROMPT. Run 'loom help' for the commands.", "unexpected argument %q", pos[0])
	}
	stdin, _ := a.env.Stdin.(*os.File)
	if !o.interactive && !ui.IsTerminal(stdin) {
		return usagef("Run 'loom run PROMPT' for one task, or pass --interactive to read requests from standard input.", "standard input is not a terminal, so there is no one to talk to")
	}
	o.graceful = true // a session goes on after a turn budget is spent
	lines := newLineReader(a.env.Stdin)
	lines.before = a.flush
	var approver *promptApprover
	sc := sessionConfig{
		trustProject: func(servers []mcp.ServerConfig) bool { return a.askTrust(lines, servers) },
	}
	if !o.yes {
		sc.approver = func(s *session) agent.Approver {
			approver = &promptApprover{s: s, lines: lines}
			return approver
		}
	}
	s, err := a.newSession(context.Background(), o, sc)
	if err != nil {
		return err
	}
	defer s.close()
	r := &repl{a: a, s: s, lines: lines, quit: make(chan struct{})}
	return r.loop()
}

// askTrust asks whether to start the servers of the workspace's .mcp.json.
func (a *app) askTrust(lines *lineReader, servers []mcp.ServerConfig) bool {
	w := a.env.Stderr
	fmt.Fprintf(w, "This workspace's %s starts these MCP servers:\n", ProjectMCPFile)
	for _, c := range servers {
		fmt.Fprintf(w, "  %s\n", ui.Sanitize(describeServer(c)))
	}
	fmt.Fprint(w, "Start them? They run with your rights. [y/N] › ")
	line, ok, _ := lines.read(context.Background())
	if !ok {
		fmt.Fprintln(w)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

type repl struct {
	a     *app
	s     *session
	lines *lineReader

	mu         sync.Mutex
	cancel     context.CancelCauseFunc // of the turn running, nil when idle
	cancelling bool
	lastIdle   time.Time // the last Ctrl-C at the prompt
	quit       chan struct{}
	quitOnce   sync.Once

	conv    string
	history []llm.Message
}

func (r *repl) loop() error {
	stop := r.handleSignals()
	defer stop()
	r.conv = "conv_" + newID()
	r.say(fmt.Sprintf("loom · %s · %s", r.s.ms.spec, r.s.ws), "dim")
	r.say("Type a request; /help for help, Ctrl-D to leave.", "dim")
	for {
		prompt, ok := r.readPrompt()
		if !ok {
			select {
			case <-r.quit:
				return &exitError{code: ExitInterrupted}
			default:
			}
			return nil
		}
		switch strings.TrimSpace(prompt) {
		case "":
			continue
		case "/exit", "/quit":
			return nil
		case "/help":
			fmt.Fprint(r.a.env.Stderr, replHelp)
			continue
		case "/new":
			r.conv, r.history = "conv_"+newID(), nil
			r.say("a new conversation", "dim")
			continue
		}
		if strings.HasPrefix(prompt, "/") && !strings.Contains(strings.Fields(prompt)[0][1:], "/") {
			r.say(fmt.Sprintf("unknown command %s; /help lists them", strings.Fields(prompt)[0]), "yellow")
			continue
		}
		r.turn(prompt)
	}
}

// turn runs one request and keeps the conversation going: after a
// completed run its messages, after an interrupted one the messages it
// had (every tool call answered), so the next request sees both.
func (r *repl) turn(prompt string) {
	ctx, cancel := context.WithCancelCause(context.Background())
	r.mu.Lock()
	r.cancel, r.cancelling = cancel, false
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.cancel = nil
		r.mu.Unlock()
		cancel(nil)
	}()
	history := r.history
	if history == nil {
		history = []llm.Message{}
	}
	res, err := r.s.start(ctx, prompt, r.conv, history)
	if err == nil {
		r.history = append(r.history, res.Messages...)
		return
	}
	var rf *runFailure
	if !errors.As(err, &rf) {
		r.say("loom: "+err.Error(), "red")
		return
	}
	if msgs := snapshotMessages(rf.err); len(msgs) > 0 {
		r.history = append(r.history, msgs...)
	}
}

// readPrompt reads one request, joining lines that end with a backslash.
func (r *repl) readPrompt() (string, bool) {
	var parts []string
	mark := "›"
	for {
		r.promptMark(mark)
		line, ok, _ := r.lines.readOrQuit(r.quit)
		if !ok {
			fmt.Fprintln(r.a.env.Stderr)
			return "", false
		}
		if strings.HasSuffix(line, "\\") {
			parts = append(parts, strings.TrimSuffix(line, "\\"))
			mark = "…"
			continue
		}
		parts = append(parts, line)
		return strings.Join(parts, "\n"), true
	}
}

func (r *repl) promptMark(mark string) {
	if r.s.text != nil {
		r.s.text.Interlude(func(w io.Writer, style func(string, string) string) {
			fmt.Fprint(w, style("bold", mark)+" ")
		})
		return
	}
	fmt.Fprint(r.a.env.Stderr, mark+" ")
}

func (r *repl) say(text, style string) {
	if r.s.text != nil {
		r.s.text.Line(style, text)
		return
	}
	fmt.Fprintln(r.a.env.Stderr, text)
}

// handleSignals makes Ctrl-C stop the running turn, and leave at the
// prompt when pressed twice within two seconds. A second Ctrl-C while a
// turn is stopping exits at once.
func (r *repl) handleSignals() (stop func()) {
	ch := r.a.env.Signals
	var own chan os.Signal
	if ch == nil {
		own = make(chan os.Signal, 2)
		signal.Notify(own, os.Interrupt, syscall.SIGTERM)
		ch = own
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-ch:
			}
			r.mu.Lock()
			switch {
			case r.cancel != nil && r.cancelling:
				r.mu.Unlock()
				fmt.Fprintln(r.a.env.Stderr, "\nloom: interrupted twice; exiting now")
				os.Exit(ExitInterrupted)
			case r.cancel != nil:
				r.cancelling = true
				r.cancel(errInterrupted)
			case time.Since(r.lastIdle) < 2*time.Second:
				r.quitOnce.Do(func() { close(r.quit) })
			default:
				r.lastIdle = time.Now()
				fmt.Fprint(r.a.env.Stderr, "\n(Ctrl-C again to leave, or /exit)\n› ")
			}
			r.mu.Unlock()
		}
	}()
	return func() {
		close(done)
		if own != nil {
			signal.Stop(own)
		}
	}
}

// readOrQuit waits for a line, or for quit to close.
func (l *lineReader) readOrQuit(quit <-chan struct{}) (string, bool, error) {
	select {
	case line, ok := <-l.C:
		return line, ok, nil
	case <-quit:
		return "", false, nil
	}
}
