package shell

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Decision is what a [Policy] says about a command.
type Decision int

const (
	// Allow: the command only reads; it runs without approval.
	Allow Decision = iota
	// Ask: the command may change something; a person (or a driver's
	// approval rule) decides.
	Ask
	// Deny: the command is refused, approved or not.
	Deny
)

// String returns "allow", "ask" or "deny".
func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// Verdict is a [Decision] with the part of the command that decided it and
// why.
type Verdict struct {
	Decision Decision
	// Reason says why, in a sentence meant for people and models.
	Reason string
	// Part is the piece of the command the reason is about (a simple
	// command, a redirection, a pipeline), as written; empty when the
	// verdict is about the whole command.
	Part string
}

// String returns the verdict as "deny: rm -rf /: deletes ...".
func (v Verdict) String() string {
	if v.Part == "" {
		return v.Decision.String() + ": " + v.Reason
	}
	return v.Decision.String() + ": " + v.Part + ": " + v.Reason
}

// Policy classifies shell commands into [Allow], [Ask] and [Deny]. Its
// zero value is the default policy; a nil *Policy is the default policy
// too. A Policy is safe for concurrent use as long as its fields are not
// changed.
//
// A command is parsed as bash (mvdan.cc/sh/v3/syntax) and every part of it
// is judged: each simple command of a list, pipeline, subshell, function
// body, command or process substitution, loop and condition, each
// redirection, and the scripts handed to bash -c, sh -c, eval, env -S,
// find -exec, xargs, alias and trap when they are written literally. The
// command gets the worst decision of its parts, however many parts there
// are. A command that cannot be parsed is never allowed.
//
// Allow is given to a conservative list of commands that only read (ls,
// cat, grep, rg, find without -exec or -delete, git status/log/diff/show,
// ...), each with its arguments checked against the options that would
// make it write or run something (find -delete, rg --pre, sort -o, git
// --output, ...), and with no output redirected to a file.
//
// Deny is given to commands that destroy the machine or escalate
// privileges: deleting, moving or changing the mode of "/", a top-level
// directory, a home directory or everything in one (rm -rf /, rm -rf /*,
// rm -fr ~, rm -rf "$EMPTY"/, rm --no-preserve-root, chmod -R 777 /);
// writing into system directories, disks or credential directories
// (> /etc/..., dd of=/dev/sda, cp x /dev/sda, tee ~/.ssh/authorized_keys);
// mkfs and disk partitioners; sudo, su, doas, pkexec; shutdown and reboot;
// kill -9 -1; fork bombs; and downloaded code run by an interpreter
// (curl ... | sh, bash <(wget ...), sh -c "$(curl ...)").
//
// Everything else is Ask, including eval and bash -c of computed strings,
// base64-decoded payloads, interpreters (python, node, perl, ...) and
// heredocs fed to them, background jobs, variable assignments, and reading
// files that usually hold credentials (~/.ssh, ~/.aws, .env, .netrc, ...)
// even with a read-only command, as their content would go to the model.
//
// This is a guard against accidents and obvious attacks, not a sandbox. A
// command built at run time (eval "$(echo cm0gLXJmIC8= | base64 -d)", a
// script the model wrote earlier, a Makefile target) is Ask, not Deny: a
// driver that approves every Ask runs it. Only an operating-system sandbox
// (a container, bubblewrap, Landlock, seatbelt) confines what a command can
// do; loom does not provide one.
type Policy struct {
	// Safe lists more command names (as typed, e.g. "make") that run
	// without approval, whatever their arguments. Use with care: a name
	// here is trusted as much as cat.
	Safe []string
	// Denied lists more command names that are always refused.
	Denied []string
	// Home is the user's home directory, for judging absolute paths into
	// it; "" means the current user's.
	Home string
}

// maxDepth bounds nested scripts (bash -c 'eval "sh -c ..."'): deeper ones
// are Ask.
const maxDepth = 6

// Classify returns the verdict for command. It never runs anything.
func (p *Policy) Classify(command string) Verdict {
	if p == nil {
		p = &Policy{}
	}
	home := p.Home
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	c := &classifier{p: p, home: home}
	c.script(command, 0, "")
	if c.v.Reason == "" {
		c.v.Reason = "only reads: every part is on the read-only list"
	}
	return c.v
}

// classifier accumulates the worst verdict over the parts of a command.
type classifier struct {
	p    *Policy
	home string
	v    Verdict
}

// note raises the verdict to d when d is worse than what is known.
func (c *classifier) note(d Decision, part, reason string) {
	if d > c.v.Decision || c.v.Reason == "" && d == c.v.Decision && d != Allow {
		c.v = Verdict{Decision: d, Reason: reason, Part: clip(part)}
	}
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		i := 200
		for i > 0 && s[i]&0xC0 == 0x80 {
			i--
		}
		s = s[:i] + "..."
	}
	return s
}

func newParser() *syntax.Parser { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }

// script judges src, a piece of bash, nested depth levels deep, started
// in the directory cwd ("" for the workspace).
func (c *classifier) script(src string, depth int, cwd string) {
	if depth > maxDepth {
		c.note(Ask, src, "scripts nested this deeply are not judged")
		return
	}
	f, err := newParser().Parse(strings.NewReader(src), "")
	if err != nil {
		c.note(Ask, src, fmt.Sprintf("cannot be parsed as bash (%v), so it cannot be judged", err))
		c.unparsed(src)
		return
	}
	s := &scope{c: c, src: src, depth: depth, cwd: cwd, seen: map[*syntax.BinaryCmd]bool{}}
	syntax.Walk(f, s.visit)
}

// scope is one parsed script: positions in its nodes are offsets into src.
type scope struct {
	c     *classifier
	src   string
	depth int
	// cwd is where the script has cd'd to, as far as can be told from the
	// text: "" is the workspace. Relative paths are judged from it, so
	// that cd / && rm -rf * is rm -rf /*.
	cwd  string
	seen map[*syntax.BinaryCmd]bool // inner pipes already judged with their pipeline
}

// resolve returns the path t as seen from the script's directory.
func (s *scope) resolve(t string) string {
	if s.cwd == "" || t == "" || t[0] == '/' || t[0] == '~' || strings.HasPrefix(t, dyn) || strings.HasPrefix(t, dynNonEmpty) {
		return t
	}
	return path.Join(s.cwd, t)
}

// chdir follows cd and pushd.
func (s *scope) chdir(a []word) {
	args := positionals(a[1:])
	switch {
	case len(args) == 0:
		s.cwd = "~"
	case !args[0].static() || args[0].s == "-":
		s.cwd = ""
	default:
		s.cwd = s.resolve(args[0].s)
		if s.cwd == "." {
			s.cwd = ""
		}
	}
}

func (s *scope) text(n syntax.Node) string {
	a, b := int(n.Pos().Offset()), int(n.End().Offset())
	if a < 0 || b > len(s.src) || a > b {
		return ""
	}
	return s.src[a:b]
}

func (s *scope) note(d Decision, n syntax.Node, reason string) {
	part := ""
	if n != nil {
		part = s.text(n)
	}
	s.c.note(d, part, reason)
}

func (s *scope) visit(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.Stmt:
		s.stmt(n)
	case *syntax.BinaryCmd:
		if (n.Op == syntax.Pipe || n.Op == syntax.PipeAll) && !s.seen[n] {
			s.pipeline(n)
		}
	case *syntax.FuncDecl:
		s.funcDecl(n)
	case *syntax.DeclClause:
		s.note(Ask, n, "sets shell variables or their attributes")
	case *syntax.CoprocClause:
		s.note(Ask, n, "starts a coprocess")
	case *syntax.TestDecl:
		s.note(Ask, n, "declares a test")
	}
	return true
}

func (s *scope) stmt(st *syntax.Stmt) {
	if st.Background || st.Coprocess || st.Disown {
		s.note(Ask, st, "runs in the background")
	}
	var stdin *word
	for _, r := range st.Redirs {
		s.redirect(r)
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			if r.Hdoc != nil {
				w := word{s: heredocText(r.Hdoc), node: r.Hdoc}
				stdin = &w
			} else {
				stdin = &word{}
			}
		case syntax.WordHdoc:
			w := word{s: wordText(r.Word) + "\n", node: r.Word}
			stdin = &w
		}
	}
	if call, ok := st.Cmd.(*syntax.CallExpr); ok {
		s.call(call, st, stdin)
	}
}

// heredocText is the body of a here-document, dyn standing for its
// expansions (a quoted delimiter makes the body one literal).
func heredocText(w *syntax.Word) string {
	var b strings.Builder
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok {
			b.WriteString(l.Value)
		} else {
			b.WriteString(dyn)
		}
	}
	return b.String()
}

func (s *scope) call(call *syntax.CallExpr, st *syntax.Stmt, stdin *word) {
	if len(call.Args) == 0 {
		s.note(Ask, call, "assigns shell variables")
		return
	}
	if len(call.Assigns) > 0 {
		s.note(Ask, call, "runs a command with variables set for it (PATH, LD_PRELOAD, ... change what runs)")
	}
	s.argv(words(call.Args), call, stdin)
}

// redirect judges where a redirection writes.
func (s *scope) redirect(r *syntax.Redirect) {
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob, syntax.AppClob,
		syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
	case syntax.DplOut, syntax.DplIn:
		t := wordText(r.Word)
		if t == "-" || strings.Trim(t, "0123456789") == "" || r.Op == syntax.DplIn {
			return // duplicating or closing a descriptor
		}
	case syntax.RdrIn:
		t := s.resolve(wordText(r.Word))
		if holdsSecrets(t, s.c.home) {
			s.note(Ask, r, "reads a file that usually holds credentials ("+t+")")
		}
		if isSocket(t) {
			s.note(Ask, r, "opens a network connection")
		}
		return
	default:
		return // reading
	}
	target := s.resolve(wordText(r.Word))
	if pathRisk(target, s.c.home) == riskSystem {
		s.note(Deny, r, "writes into a system directory, a device or a credential directory")
		return
	}
	if isSocket(target) {
		s.note(Ask, r, "opens a network connection")
		return
	}
	if isQuietDevice(target) {
		return
	}
	s.note(Ask, r, "writes a file")
}

// quietDevices may be written without asking: writing them changes
// nothing.
var quietDevices = []string{"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/"}

func isQuietDevice(t string) bool    { return inDevices(t, quietDevices) }
func isHarmlessDevice(t string) bool { return inDevices(t, harmlessDevices) }

// isSocket reports whether t is one of bash's network paths.
func isSocket(t string) bool {
	return strings.HasPrefix(t, "/dev/tcp/") || strings.HasPrefix(t, "/dev/udp/")
}

func inDevices(t string, list []string) bool {
	for _, d := range list {
		if t == d || strings.HasSuffix(d, "/") && strings.HasPrefix(t, d) {
			return true
		}
	}
	return false
}

// pipeline judges what flows between the stages of a | b | c: downloaded
// content must not reach an interpreter's standard input.
func (s *scope) pipeline(n *syntax.BinaryCmd) {
	var stages []*syntax.Stmt
	var flatten func(st *syntax.Stmt)
	flatten = func(st *syntax.Stmt) {
		if b, ok := st.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) && len(st.Redirs) == 0 {
			s.seen[b] = true
			flatten(b.X)
			flatten(b.Y)
			return
		}
		stages = append(stages, st)
	}
	s.seen[n] = true
	flatten(n.X)
	flatten(n.Y)
	downloaded := false
	for i, st := range stages {
		if i > 0 {
			downloaded = downloaded || hasDownloader(stages[i-1])
		}
		call, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || i == 0 {
			continue
		}
		interp, ok := stdinInterpreter(words(call.Args))
		if !ok {
			continue
		}
		if downloaded {
			s.note(Deny, n, fmt.Sprintf("pipes downloaded content into %s, which runs it", interp))
			continue
		}
		if isShell(interp) && i == 1 {
			if text, ok := echoed(stages[0]); ok {
				s.c.script(text, s.depth+1, s.cwd)
			}
		}
	}
}

// echoed returns what a stage that is a literal echo or printf prints.
func echoed(st *syntax.Stmt) (string, bool) {
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) < 2 || len(st.Redirs) > 0 {
		return "", false
	}
	ws := words(call.Args)
	for _, w := range ws {
		if !w.static() {
			return "", false
		}
	}
	switch ws[0].s {
	case "echo", "printf":
	default:
		return "", false
	}
	var parts []string
	for _, w := range ws[1:] {
		if ws[0].s == "echo" && len(parts) == 0 && strings.HasPrefix(w.s, "-") && strings.Trim(w.s[1:], "neE") == "" {
			continue
		}
		parts = append(parts, strings.ReplaceAll(w.s, `\n`, "\n"))
	}
	return strings.Join(parts, " "), true
}

// funcDecl refuses fork bombs: a function that calls itself more than once,
// or once in the background.
func (s *scope) funcDecl(f *syntax.FuncDecl) {
	if f.Name == nil || f.Body == nil {
		return
	}
	name := f.Name.Value
	calls, bomb := 0, false
	var stack []bool // for each open node: is it a statement run in the background
	syntax.Walk(f.Body, func(n syntax.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		st, isStmt := n.(*syntax.Stmt)
		stack = append(stack, isStmt && st.Background)
		if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 && wordText(call.Args[0]) == name {
			calls++
			if slices.Contains(stack, true) {
				bomb = true
			}
		}
		return true
	})
	if bomb || calls >= 2 {
		s.note(Deny, f, "is a fork bomb: the function starts copies of itself")
	}
}

// unparsed looks for the worst words in a command that could not be
// parsed, so that a syntax error does not hide rm -rf / from the policy.
func (c *classifier) unparsed(src string) {
	fields := strings.FieldsFunc(src, func(r rune) bool {
		return strings.ContainsRune(" \t\r\n;&|()<>`$\"'{}\\", r)
	})
	shell, download := false, false
	for i, f := range fields {
		name := baseName(f)
		if reason, ok := deniedName(name); ok {
			c.note(Deny, src, reason)
		}
		if slices.Contains(c.p.Denied, name) {
			c.note(Deny, src, "is on this policy's denied list")
		}
		if name == "rm" {
			for _, g := range fields[i+1:] {
				if pathRisk(g, c.home) >= riskSystem {
					c.note(Deny, src, "deletes "+g+" (cannot be parsed, and names a root, home or system path)")
				}
			}
		}
		shell = shell || isShell(name)
		download = download || isDownloader(name)
	}
	if shell && download {
		c.note(Deny, src, "downloads something and runs a shell (cannot be parsed, so it is refused)")
	}
}
