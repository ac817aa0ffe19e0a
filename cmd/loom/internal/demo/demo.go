// Package demo is loom demo: it starts loomtest, a fake model server
// speaking the OpenAI and Anthropic wire formats, on loopback inside the
// process, and runs scenarios through the real adapters, tools and agent
// loop in a temporary workspace. Each scenario shows what happens and checks
// it against what the server received; Run reports whether all behaved.
//
// The scenarios are those of the seed article on surviving vendor format
// differences (an OpenAI tool round trip, an Anthropic one with its system
// prompt, 503 twice then success, 401 not retried, a sandbox escape and a
// looping model stopped by the turn budget), a dangerous command refused
// although approved, and a short coding task.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/cmd/loom/internal/ui"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/tool"
	loomfs "github.com/loomkit/loom/tool/fs"
	"github.com/loomkit/loom/tool/shell"
)

// Options configure Run.
type Options struct {
	// Out receives everything the demo prints.
	Out io.Writer
	// Color uses ANSI colours (set it when Out is a terminal).
	Color bool
	// Only, when not empty, runs the scenarios with these numbers (1-based).
	Only []int
}

// Run runs the scenarios and reports whether every check held. It needs
// no network and no key; it writes only in a temporary directory, which it
// removes.
func Run(ctx context.Context, o Options) bool {
	start := time.Now()
	d := &demo{out: o.Out, color: o.Color}
	ws, err := os.MkdirTemp("", "loom-demo-")
	if err != nil {
		d.printf("%s cannot make a temporary workspace: %v\n", d.style(red, "✘"), err)
		return false
	}
	defer os.RemoveAll(ws)
	d.ws = ws
	d.printf("%s\n", d.style(bold, "loom demo"))
	d.printf("%s\n", d.style(dim, "A fake model server (loomtest) runs on loopback in this process and plays scripted turns in the\n"+
		"OpenAI and Anthropic wire formats. The adapters, tools, agent loop and retries are loom's own.\n"+
		"workspace: "+ws))
	passed, total := 0, 0
	for i, sc := range scenarios {
		if len(o.Only) > 0 && !contains(o.Only, i+1) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		total++
		d.printf("\n%s\n", d.style(bold, fmt.Sprintf("%d. %s", i+1, sc.title)))
		d.failed = false
		sc.run(ctx, d)
		if !d.failed {
			passed++
		}
	}
	elapsed := time.Since(start).Round(10 * time.Millisecond)
	if passed == total && ctx.Err() == nil {
		d.printf("\n%s\n", d.style(green, fmt.Sprintf("All %d scenarios behaved (%s).", total, elapsed)))
		return true
	}
	if ctx.Err() != nil {
		d.printf("\n%s\n", d.style(yellow, "interrupted"))
		return false
	}
	d.printf("\n%s\n", d.style(red, fmt.Sprintf("%d of %d scenarios did not behave (%s).", total-passed, total, elapsed)))
	return false
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

type scenario struct {
	title string
	run   func(ctx context.Context, d *demo)
}

type demo struct {
	out    io.Writer
	color  bool
	ws     string
	failed bool
}

const (
	reset  = "\x1b[0m"
	bold   = "\x1b[1m"
	dim    = "\x1b[2m"
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
)

func (d *demo) style(s, text string) string {
	if !d.color {
		return text
	}
	return s + text + reset
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

// say prints what a scenario shows, indented.
func (d *demo) say(format string, args ...any) {
	d.printf("   %s\n", fmt.Sprintf(format, args...))
}

// check prints a check and records a failure.
func (d *demo) check(ok bool, format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	if ok {
		d.printf("   %s %s\n", d.style(green, "✔"), what)
		return
	}
	d.failed = true
	d.printf("   %s %s\n", d.style(red, "✘ FAILED:"), what)
}

// text returns a renderer of runs, indented under the scenario.
func (d *demo) text() *ui.Text {
	return &ui.Text{Out: d.out, Err: d.out, Color: d.color, Indent: "   ", Stream: true} // one transcript
}

// tools returns loom's file tools and bash over the workspace, bash in
// loom's default sandbox.
func (d *demo) tools() (*tool.Set, func()) {
	return d.toolsIn(&shell.Sandbox{})
}

// toolsIn is tools with bash in box.
func (d *demo) toolsIn(box *shell.Sandbox) (*tool.Set, func()) {
	files, err := loomfs.New(d.ws, nil)
	if err != nil {
		panic(err) // the workspace was just made; a failure is a bug
	}
	set, err := tool.NewSet(append(files.Tools(), shell.New(&shell.Config{Dir: files.Dir(), Sandbox: box}))...)
	if err != nil {
		panic(err)
	}
	return set, func() { files.Close() }
}

// fastRetries is the retry policy of the demo: the default rules with
// short waits, so that the demo takes a few seconds.
var fastRetries = model.RetryPolicy{BaseDelay: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond}

// drive runs an agent on prompt, streaming or not, rendering its events,
// and returns its result, its events and its error.
func (d *demo) drive(ctx context.Context, a *agent.Agent, prompt string, stream bool, modelName string) (agent.Result, []agent.Event, error) {
	t := d.text()
	defer t.Close()
	var events []agent.Event
	var res agent.Result
	var runID string
	handle := func(ev agent.Event) {
		events = append(events, ev)
		switch ev := ev.(type) {
		case agent.RunStarted:
			runID = ev.RunID
			t.Start(ev.RunID, modelName, ev.Resumed)
		case agent.Done:
			res = ev.Result
			t.Done(ev.Result)
		default:
			t.Event(ev)
		}
	}
	var err error
	if stream {
		for ev, e := range a.Stream(ctx, agent.Prompt(prompt)) {
			if e != nil {
				err = e
				break
			}
			handle(ev)
		}
	} else {
		in := agent.Prompt(prompt)
		in.OnEvent = handle
		_, err = a.Run(ctx, in)
	}
	if err != nil {
		t.Fail(runID, err, false)
	}
	return res, events, err
}
