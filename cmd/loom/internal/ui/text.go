package ui

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

// Text renders a run for people. Out gets the answer: by default each
// run's final answer alone, written when the run is done, so that a pipe
// or a file holds what a program reading it expects; with Stream, the
// model's text as it arrives. Everything else goes to Err, one line each:
// the run's id, a line per tool call ("[bash: go test ./...]") and a short
// summary of its result, retries and their waits, notes, and at the end
// the turns, tokens and cost. With Color, lines are coloured; with
// Spinner, a spinner on Err says what loom is waiting for, and without
// Stream the model's text is shown on Err as it arrives. Set Color and
// Spinner only when Err is a terminal (IsTerminal) and, for Color, when
// ColorAllowed.
//
// Make a Text with its fields set and call Close when done with it (it stops
// the spinner). A Text may render several runs one after the other.
type Text struct {
	Out, Err io.Writer
	Color    bool
	Spinner  bool
	// Stream writes the model's text to Out as it arrives: the text it
	// writes beside tool calls, and that of an attempt that broke off and
	// was asked again (TurnRestarted), as well as the final answer. Set it
	// only when Out is a terminal (or is Err, one transcript): a program
	// reading a pipe or a file wants the final answer alone.
	Stream bool
	// Indent is written before every line (the demo indents).
	Indent string
	// Hint, when set, may return a line of advice about a failure (what
	// to change on the command line), shown under it.
	Hint func(err error) string

	mu       sync.Mutex
	lineOpen bool // the live writer (see live) holds a partial line
	spin     *spinner
	label    string // what the spinner says; "" hides it
	calls    int    // tool calls of the current batch
	results  bool   // the last event was a tool result
	model    string
	usage    llm.Usage
	cost     float64
}

// ANSI styles.
const (
	reset  = "\x1b[0m"
	bold   = "\x1b[1m"
	dim    = "\x1b[2m"
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	cyan   = "\x1b[36m"
)

func (t *Text) style(s, text string) string {
	if !t.Color || text == "" {
		return text
	}
	return s + text + reset
}

// Start implements Sink.
func (t *Text) Start(runID, model string, resumed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.model, t.usage, t.cost, t.calls = model, llm.Usage{}, 0, 0
	verb := "run"
	if resumed {
		verb = "resuming run"
	}
	t.errLine(t.style(dim, fmt.Sprintf("%s %s · %s", verb, runID, model)))
	t.wait("waiting for " + model)
}

// Event implements Sink.
func (t *Text) Event(ev agent.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch ev := ev.(type) {
	case agent.TextDelta:
		if ev.Text == "" || t.live() == nil {
			return
		}
		t.clearSpinner()
		t.label = ""
		t.writeLive(Sanitize(ev.Text))
	case agent.ThinkingDelta:
		t.wait("thinking")
	case agent.ToolCall:
		if t.results {
			t.calls, t.results = 0, false
		}
		t.calls++
		t.errLine(t.style(cyan, "["+t.style(bold, ev.Call.Name)+t.colorAgain(cyan)+CallSummary(ev.Call)+"]"))
		if !ev.Preresolved {
			t.wait("running " + ev.Call.Name)
		}
	case agent.ToolResult:
		prefix := ""
		if t.calls > 1 {
			prefix = ev.Call.Name + ": "
		}
		sum := ResultSummary(ev.Call.Name, ev.Result)
		if ev.Result.IsError {
			t.errLine("  " + t.style(red, "✗ "+prefix+sum))
		} else {
			t.errLine("  " + t.style(green, "✓") + " " + prefix + sum)
		}
		t.results = true
		t.wait("waiting for " + t.model)
	case agent.InvalidToolCall:
		t.errLine("  " + t.style(yellow, fmt.Sprintf("! the model called %q, which is not a tool here", ev.Call.Name)))
	case agent.Retrying:
		t.errLine("  " + t.style(yellow, fmt.Sprintf("↻ %s; retrying in %s (attempt %d failed)", short(ev.Err), Duration(ev.Wait), ev.Attempt)))
		t.wait("retrying in " + Duration(ev.Wait))
	case agent.TurnRestarted:
		t.closeLine()
		t.errLine("  " + t.style(yellow, fmt.Sprintf("↻ the answer broke off (%s); asking again in %s", short(ev.Err), Duration(ev.Wait))))
		t.wait("retrying in " + Duration(ev.Wait))
	case agent.Note:
		t.errLine("  " + t.style(yellow, "! "+firstLine(ev.Text, 160)))
	case agent.Usage:
		t.usage, t.cost = ev.Total, ev.CostUSD
	case agent.ApprovalRequested:
		if t.results {
			t.calls, t.results = 0, false
		}
	}
}

// colorAgain restarts a colour after a nested style reset it.
func (t *Text) colorAgain(s string) string {
	if !t.Color {
		return ""
	}
	return s
}

// Done implements Sink.
func (t *Text) Done(res agent.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.label = ""
	t.clearSpinner()
	t.closeLine()
	if !t.Stream && res.Output != "" {
		answer := Sanitize(res.Output)
		if !strings.HasSuffix(answer, "\n") {
			answer += "\n"
		}
		t.write(t.Out, answer)
	}
	t.usage, t.cost = res.Usage, res.CostUSD
	t.errLine(t.style(green, "✓ done") + t.style(dim, " · "+t.footer(len(res.Calls))))
	t.calls, t.results = 0, false
}

// Fail implements Sink.
func (t *Text) Fail(runID string, err error, resumable bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.label = ""
	t.closeLine()
	foot := t.footer(-1)
	if foot != "" {
		foot = t.style(dim, " · "+foot)
	}
	if Kind(err) == "interrupted" {
		if t.Spinner {
			io.WriteString(t.Err, "\r\x1b[K") // over the terminal's ^C
		}
		t.errLine(t.style(yellow, "interrupted") + foot)
	} else {
		t.errLine(t.style(red, "✗ "+Message(err)) + foot)
	}
	if t.Hint != nil {
		if h := t.Hint(err); h != "" {
			t.errLine(t.style(dim, h))
		}
	}
	if resumable && runID != "" {
		t.errLine(t.style(dim, "the run is saved; continue it with: ") + "loom resume " + runID)
	}
	t.calls, t.results = 0, false
}

func (t *Text) footer(turns int) string {
	var parts []string
	if turns >= 0 {
		parts = append(parts, plural(turns, "turn"))
	}
	if !t.usage.IsZero() {
		parts = append(parts, fmt.Sprintf("%s in / %s out tokens", Count(t.usage.InputTokens), Count(t.usage.OutputTokens)))
	}
	if t.cost > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f", t.cost))
	}
	return strings.Join(parts, " · ")
}

// Line writes a line of its own on Err, in the given style ("" for none,
// else "dim", "red", "green", "yellow").
func (t *Text) Line(style, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errLine(t.style(styles[style], text))
}

var styles = map[string]string{"": "", "dim": dim, "red": red, "green": green, "yellow": yellow, "cyan": cyan, "bold": bold}

// Interlude runs fn with the spinner hidden and Out's line closed, so that
// fn can write a question on Err and read the answer (an approval prompt).
// Nothing else is rendered meanwhile.
func (t *Text) Interlude(fn func(w io.Writer, style func(name, text string) string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	label := t.label
	t.label = ""
	t.clearSpinner()
	t.closeLine()
	fn(t.Err, func(name, text string) string { return t.style(styles[name], text) })
	t.label = label
}

// Close stops the spinner.
func (t *Text) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.label = ""
	t.clearSpinner()
	if t.spin != nil {
		close(t.spin.stop)
		t.spin = nil
	}
}

// live returns where the model's text goes as it arrives: Out with
// Stream, else Err when it is a terminal (Spinner), else nowhere.
func (t *Text) live() io.Writer {
	switch {
	case t.Stream:
		return t.Out
	case t.Spinner:
		return t.Err
	}
	return nil
}

// writeLive writes text as it arrives on the live writer, each line
// indented by Indent.
func (t *Text) writeLive(text string) {
	t.lineOpen = t.write(t.live(), text)
}

// write writes text on w, each line indented by Indent, continuing the
// line the live writer holds open when w is it, and reports whether it
// leaves a partial line.
func (t *Text) write(w io.Writer, text string) bool {
	open := t.lineOpen && w == t.live()
	if t.Indent == "" {
		io.WriteString(w, text)
		return open && text == "" || text != "" && !strings.HasSuffix(text, "\n")
	}
	for text != "" {
		line, rest, nl := strings.Cut(text, "\n")
		if !open && line != "" {
			io.WriteString(w, t.Indent)
		}
		io.WriteString(w, line)
		if line != "" {
			open = true
		}
		if nl {
			io.WriteString(w, "\n")
			open = false
		}
		text = rest
	}
	return open
}

// closeLine ends a partial line of text on the live writer.
func (t *Text) closeLine() {
	if t.lineOpen {
		io.WriteString(t.live(), "\n")
		t.lineOpen = false
	}
}

// errLine writes one line on Err, after closing Out's line and hiding the
// spinner. The caller holds t.mu.
func (t *Text) errLine(s string) {
	t.clearSpinner()
	t.closeLine()
	io.WriteString(t.Err, t.Indent+s+"\n")
}

// wait sets what the spinner says. The caller holds t.mu.
func (t *Text) wait(label string) {
	t.label = label
	if !t.Spinner || t.spin != nil {
		return
	}
	t.spin = &spinner{stop: make(chan struct{})}
	go t.spinLoop(t.spin)
}

type spinner struct {
	stop  chan struct{}
	shown bool
	frame int
	since time.Time
	label string
}

var frames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func (t *Text) spinLoop(s *spinner) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		t.mu.Lock()
		if t.spin == s {
			t.drawSpinner()
		}
		t.mu.Unlock()
	}
}

// drawSpinner redraws the spinner line. The caller holds t.mu.
func (t *Text) drawSpinner() {
	s := t.spin
	if t.label == "" || t.lineOpen {
		t.clearSpinner()
		return
	}
	if s.label != t.label {
		s.label, s.since = t.label, time.Now()
	}
	s.frame = (s.frame + 1) % len(frames)
	text := fmt.Sprintf("%s %s… %s", frames[s.frame], t.label, Duration(time.Since(s.since).Truncate(time.Second)))
	io.WriteString(t.Err, "\r"+t.Indent+t.style(dim, text)+"\x1b[K")
	s.shown = true
}

// clearSpinner erases the spinner line if it is shown. The caller holds
// t.mu.
func (t *Text) clearSpinner() {
	if t.spin != nil && t.spin.shown {
		io.WriteString(t.Err, "\r\x1b[K")
		t.spin.shown = false
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Count writes n with thousands separators.
func Count(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Duration writes d briefly: "50ms", "1.5s", "2m0s".
func Duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// short describes a model error in a few words: its status and message.
func short(err error) string {
	if err == nil {
		return "failed"
	}
	var me *model.Error
	if errors.As(err, &me) {
		msg := me.Message
		if msg == "" && me.Err != nil {
			msg = me.Err.Error()
		}
		head := string(me.Kind)
		if me.Status != 0 {
			head = fmt.Sprintf("%d %s", me.Status, me.Kind)
		}
		if msg == "" {
			return head
		}
		return head + ": " + firstLine(msg, 100)
	}
	return firstLine(err.Error(), 120)
}
