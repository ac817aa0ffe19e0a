package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/cmd/loom/internal/ui"
	"github.com/loomkit/loom/run"
)

// lineReader reads standard input a line at a time on a goroutine of its
// own, so that waiting for a line can be abandoned (Ctrl-C cancels an
// approval prompt). C is closed at end of input.
type lineReader struct {
	C <-chan string
	// before, when set, is called before waiting: it writes out what the
	// scrubbing writers hold back, so that a question is seen whole.
	before func()
}

func newLineReader(r io.Reader) *lineReader {
	c := make(chan string)
	go func() {
		defer close(c)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if line != "" || err == nil {
				c <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				return
			}
		}
	}()
	return &lineReader{C: c}
}

// read waits for a line; ok is false at end of input.
func (l *lineReader) read(ctx context.Context) (line string, ok bool, err error) {
	if l.before != nil {
		l.before()
	}
	select {
	case line, ok = <-l.C:
		return line, ok, nil
	case <-ctx.Done():
		return "", false, context.Cause(ctx)
	}
}

// promptApprover asks the person at the terminal about each call that
// needs approval: yes, no, always for this tool in this session, or no
// with a reason the model reads.
type promptApprover struct {
	s     *session
	lines *lineReader

	mu     sync.Mutex
	always map[string]bool
}

func (p *promptApprover) Approve(ctx context.Context, req agent.ApprovalRequest) ([]run.Decision, error) {
	ds := make([]run.Decision, len(req.Calls))
	for i, c := range req.Calls {
		p.mu.Lock()
		always := p.always[c.Call.Name]
		p.mu.Unlock()
		if always {
			ds[i] = run.Decision{CallID: c.Call.ID, Action: run.Approved}
			continue
		}
		d, err := p.ask(ctx, c)
		if err != nil {
			return nil, err
		}
		ds[i] = d
	}
	return ds, nil
}

func (p *promptApprover) ask(ctx context.Context, c run.PendingCall) (d run.Decision, err error) {
	d.CallID = c.Call.ID
	ask := func(w io.Writer, style func(name, text string) string) {
		fmt.Fprintf(w, "%s %s\n", style("yellow", "?"), p.describe(c))
		fmt.Fprintf(w, "  %s yes · %s no · %s always allow %s in this session · or type why not\n  %s ",
			style("bold", "[y]"), style("bold", "[n]"), style("bold", "[a]"), c.Call.Name, style("yellow", "›"))
		var line string
		var ok bool
		line, ok, err = p.lines.read(ctx)
		if err != nil {
			fmt.Fprintln(w)
			return
		}
		if !ok {
			fmt.Fprintln(w)
			d.Action, d.Reason = run.Denied, agent.NotApproved+" (the user closed the input)"
			return
		}
		answer := strings.TrimSpace(line)
		switch strings.ToLower(answer) {
		case "y", "yes":
			d.Action = run.Approved
		case "a", "always":
			d.Action = run.Approved
			p.mu.Lock()
			if p.always == nil {
				p.always = map[string]bool{}
			}
			p.always[c.Call.Name] = true
			p.mu.Unlock()
		case "", "n", "no":
			d.Action, d.Reason = run.Denied, "the user said no"
		default:
			reason := answer
			for _, pre := range []string{"no:", "no,", "no ", "n:", "n "} {
				if len(reason) > len(pre) && strings.EqualFold(reason[:len(pre)], pre) {
					reason = strings.TrimSpace(reason[len(pre):])
					break
				}
			}
			d.Action, d.Reason = run.Denied, "the user said no: "+reason
		}
	}
	if p.s.text != nil {
		p.s.text.Interlude(ask)
	} else {
		ask(p.s.a.env.Stderr, func(_, text string) string { return text })
	}
	return d, err
}

// describe says what a call would do, for the person deciding.
func (p *promptApprover) describe(c run.PendingCall) string {
	var args map[string]any
	json.Unmarshal([]byte(c.Call.Arguments), &args)
	str := func(k string) string { s, _ := args[k].(string); return ui.Sanitize(s) }
	switch c.Call.Name {
	case "bash":
		cmd := str("command")
		v := p.s.tb.bash.Classify(cmd)
		why := ""
		if v.Reason != "" {
			why = " (" + v.Reason + ")"
		}
		return fmt.Sprintf("bash wants to run%s:\n    %s", why, strings.ReplaceAll(cmd, "\n", "\n    "))
	case "write_file":
		return fmt.Sprintf("write_file wants to write %s (%d bytes)", str("path"), len(str("content")))
	case "edit_file":
		return fmt.Sprintf("edit_file wants to change %s:\n    - %s\n    + %s", str("path"),
			ui.Sanitize(clip(str("old_string"), 200)), ui.Sanitize(clip(str("new_string"), 200)))
	case "web_fetch":
		return "web_fetch wants to fetch " + str("url")
	}
	what := "a tool"
	if c.Spec.Effect != "" {
		what = "a " + string(c.Spec.Effect) + " tool"
	}
	return fmt.Sprintf("%s (%s) wants to run with %s", c.Call.Name, what, ui.Sanitize(clip(c.Call.Arguments, 400)))
}

func clip(s string, max int) string {
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}
