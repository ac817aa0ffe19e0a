package shell

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// argv judges one simple command given as words; n is the node its text is
// quoted from, stdin the here-document it reads when there is one.
func (s *scope) argv(a []word, n syntax.Node, stdin *word) {
	if len(a) == 0 {
		return
	}
	name := a[0]
	if !name.static() {
		s.note(Ask, n, "the command's name is only known when the shell runs")
		s.downloadedCode(a, n)
		return
	}
	base := baseName(name.s)
	if reason, ok := deniedName(base); ok {
		s.note(Deny, n, reason)
		return
	}
	if slices.Contains(s.c.p.Denied, base) || slices.Contains(s.c.p.Denied, name.s) {
		s.note(Deny, n, "is on this policy's list of refused commands")
		return
	}
	if !trusted(name.s) && !slices.Contains(s.c.p.Safe, name.s) {
		s.note(Ask, n, name.s+" is not a system program")
	}
	if w, ok := unwrap(base, a); ok {
		if w.floor > Allow {
			s.note(w.floor, n, w.reason)
		}
		if w.script != nil {
			s.nested(*w.script, n)
		}
		s.argv(w.inner, n, stdin)
		return
	}
	switch {
	case isShell(base):
		s.shell(a, n, stdin)
		return
	case isInterpreter(base):
		s.note(Ask, n, "runs a program in "+base+"; what it does cannot be judged")
		s.downloadedCode(a, n)
		return
	}
	switch base {
	case "eval":
		s.eval(a, n)
	case "source", ".":
		s.note(Ask, n, "runs the commands of a file in this shell")
		s.downloadedCode(a, n)
	case "alias", "trap":
		s.note(Ask, n, "defines commands that run later")
		for _, w := range a[1:] {
			if body, ok := strings.CutPrefix(w.s, "-"); ok && body != "" {
				continue
			}
			if base == "alias" {
				_, v, ok := strings.Cut(w.s, "=")
				if ok {
					s.nested(word{s: v}, n)
				}
			} else {
				s.nested(w, n)
				break
			}
		}
	case "watch":
		s.watch(a, n)
	case "rm":
		s.rm(a, n)
	case "find":
		s.find(a, n)
	case "dd":
		s.dd(a, n)
	case "chmod", "chown", "chgrp", "chattr", "setfacl":
		s.targets(a, n, riskSystem, "changes the owner or permissions of a root, home, system or credential path", "changes owners or permissions")
	case "mv":
		s.targets(a, n, riskSystem, "moves a root, home, system or credential path away", "moves files")
	case "shred", "unlink":
		s.targets(a, n, riskSystem, "destroys a file in a root, home, system or credential path", "destroys files")
	case "tee", "truncate", "sponge":
		if len(positionals(a[1:])) > 0 {
			s.writes(positionals(a[1:]), n)
		}
	case "cp", "install", "ln", "rsync", "scp":
		s.copyInto(a, n)
	case "kill":
		s.kill(a, n)
	case "init", "telinit":
		if len(a) > 1 && (a[1].s == "0" || a[1].s == "6") {
			s.note(Deny, n, "halts or reboots the machine")
		} else {
			s.note(Ask, n, "changes the system's run level")
		}
	case "systemctl":
		for _, w := range a[1:] {
			switch w.s {
			case "poweroff", "reboot", "halt", "kexec", "soft-reboot", "emergency", "rescue":
				s.note(Deny, n, "shuts down or restarts the machine")
			}
		}
		s.note(Ask, n, "controls system services")
	case "git":
		s.git(a, n)
	case "cd", "pushd":
		s.chdir(a)
		s.safe(base, a, n)
	default:
		s.safe(base, a, n)
	}
}

// nested judges a script written literally inside a command (bash -c '...',
// eval '...', alias x='...').
func (s *scope) nested(w word, n syntax.Node) {
	if !w.static() {
		s.note(Ask, n, "runs a script that is only known when the shell runs")
		if w.node != nil && hasDownloader(w.node) {
			s.note(Deny, n, "runs code it downloads")
		}
		return
	}
	s.c.script(w.s, s.depth+1, s.cwd)
}

// downloadedCode refuses interpreters whose code comes from a download:
// bash <(curl ...), sh -c "$(wget -O- ...)", python -c "$(curl ...)".
func (s *scope) downloadedCode(a []word, n syntax.Node) {
	for _, w := range a {
		if w.node != nil && hasDownloader(w.node) {
			s.note(Deny, n, "runs code it downloads")
			return
		}
	}
}

// baseName is the command's file name: /usr/bin/git is git.
func baseName(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// trusted reports whether the name finds a system program: a bare name, or
// a path in a standard directory. ./ls and /tmp/x/cat are not the real ones.
func trusted(name string) bool {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return true
	}
	switch name[:i] {
	case "/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/opt/homebrew/bin":
		return true
	}
	return false
}

// deniedName returns why a command is always refused, whatever its
// arguments.
func deniedName(base string) (string, bool) {
	switch base {
	case "sudo", "su", "doas", "pkexec", "runuser", "sudoedit", "run0":
		return "runs a command as another user; privilege escalation is never allowed", true
	case "shutdown", "reboot", "halt", "poweroff":
		return "shuts down or restarts the machine", true
	case "mke2fs", "mkswap", "mkdosfs", "mkntfs", "wipefs", "fdisk", "sfdisk", "cfdisk",
		"gdisk", "sgdisk", "parted", "blkdiscard", "diskutil":
		return "formats, wipes or repartitions a disk", true
	}
	if strings.HasPrefix(base, "mkfs") || strings.HasPrefix(base, "newfs") {
		return "formats, wipes or repartitions a disk", true
	}
	return "", false
}

func isShell(base string) bool {
	switch base {
	case "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash", "posh", "rbash":
		return true
	}
	return false
}

func isInterpreter(base string) bool {
	for _, p := range []string{"python", "perl", "ruby", "php", "lua", "pypy"} {
		if strings.HasPrefix(base, p) {
			return true
		}
	}
	switch base {
	case "node", "nodejs", "deno", "bun", "Rscript", "R", "pwsh", "powershell", "osascript",
		"awk", "gawk", "mawk", "nawk", "tclsh", "wish", "expect", "irb", "jshell", "groovy",
		"julia", "luajit", "java", "jrunscript", "scala", "erl", "escript", "guile", "racket", "sbcl":
		return true
	}
	return false
}

func isDownloader(base string) bool {
	switch base {
	case "curl", "wget", "wget2", "fetch", "aria2c", "axel", "http", "https", "xh", "httpie",
		"lwp-request", "lwp-download", "GET", "nc", "ncat", "netcat", "socat", "ftp", "tftp":
		return true
	}
	return false
}

// hasDownloader reports whether n runs a download tool anywhere inside, or
// reads from a /dev/tcp or /dev/udp socket.
func hasDownloader(n syntax.Node) bool {
	found := false
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			for _, w := range n.Args {
				if isDownloader(baseName(wordText(w))) {
					found = true
				}
			}
		case *syntax.Redirect:
			t := wordText(n.Word)
			if strings.HasPrefix(t, "/dev/tcp/") || strings.HasPrefix(t, "/dev/udp/") {
				found = true
			}
		}
		return !found
	})
	return found
}

// stdinInterpreter reports whether a runs code read from its standard
// input (sh, bash -s, python -, source /dev/stdin), and names it.
func stdinInterpreter(a []word) (string, bool) {
	for range 16 {
		if len(a) == 0 || !a[0].static() {
			return "", false
		}
		base := baseName(a[0].s)
		w, ok := unwrap(base, a)
		if !ok {
			break
		}
		a = w.inner
	}
	if len(a) == 0 {
		return "", false
	}
	base := baseName(a[0].s)
	switch {
	case isShell(base):
		mode, _ := shellMode(a)
		return base, mode == fromStdin
	case base == "source" || base == ".":
		if len(a) > 1 {
			switch a[1].s {
			case "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-":
				return base, true
			}
		}
		return "", false
	case isInterpreter(base) && !strings.HasSuffix(base, "awk"):
		for _, w := range a[1:] {
			t := w.s
			if t == "-" {
				return base, true
			}
			if !strings.HasPrefix(t, "-") {
				return "", false // a script file
			}
			for _, f := range []string{"-c", "-e", "-E", "-m", "-r", "-p", "--eval", "--print", "-Command", "-command"} {
				if t == f || len(f) == 2 && strings.HasPrefix(t, f) {
					return "", false // code on the command line
				}
			}
		}
		return base, true
	}
	return "", false
}

type shellRuns int

const (
	fromStdin shellRuns = iota
	fromString
	fromFile
)

// shellMode says where a shell invocation takes its script from, and
// returns the script (for -c) or the file.
func shellMode(a []word) (shellRuns, *word) {
	i, cmd, stdin := 1, false, false
	for ; i < len(a); i++ {
		t := a[i].s
		if !a[i].static() || len(t) < 2 || t[0] != '-' && t[0] != '+' {
			break
		}
		if t == "--" || t == "-" {
			i++
			break
		}
		if strings.HasPrefix(t, "--") {
			if t == "--rcfile" || t == "--init-file" {
				i++
			}
			continue
		}
		if t[0] == '-' {
			cmd = cmd || strings.ContainsRune(t[1:], 'c')
			stdin = stdin || strings.ContainsRune(t[1:], 's')
		}
		if strings.ContainsAny(t[1:], "oO") {
			i++ // -o pipefail
		}
	}
	switch {
	case cmd:
		if i < len(a) {
			return fromString, &a[i]
		}
		return fromString, &word{}
	case stdin || i >= len(a):
		return fromStdin, nil
	}
	return fromFile, &a[i]
}

// shell judges sh/bash/... by the script it runs.
func (s *scope) shell(a []word, n syntax.Node, stdin *word) {
	mode, w := shellMode(a)
	switch mode {
	case fromString:
		s.nested(*w, n)
	case fromFile:
		s.note(Ask, n, "runs a script file; what it does cannot be judged")
		s.downloadedCode(a, n)
	case fromStdin:
		if stdin != nil {
			s.nested(*stdin, n)
		} else {
			s.note(Ask, n, "runs a shell reading commands from its input")
		}
	}
}

// eval judges the script eval runs; it is never allowed without approval.
func (s *scope) eval(a []word, n syntax.Node) {
	s.note(Ask, n, "eval runs a string as commands")
	if len(a) < 2 {
		return
	}
	parts := make([]string, 0, len(a)-1)
	static := true
	for _, w := range a[1:] {
		parts = append(parts, w.s)
		static = static && w.static()
	}
	if !static {
		s.downloadedCode(a, n)
		return
	}
	s.c.script(strings.Join(parts, " "), s.depth+1, s.cwd)
}

// watch runs its command again and again: judge that command.
func (s *scope) watch(a []word, n syntax.Node) {
	i, exec := 1, false
	for ; i < len(a); i++ {
		t := a[i].s
		if t == "--" {
			i++
			break
		}
		if !strings.HasPrefix(t, "-") {
			break
		}
		switch t {
		case "-n", "--interval", "-q", "--equexit":
			i++
		case "-x", "--exec":
			exec = true
		}
	}
	if i >= len(a) {
		return
	}
	if exec {
		s.argv(a[i:], n, nil)
		return
	}
	parts := make([]string, 0, len(a)-i)
	for _, w := range a[i:] {
		parts = append(parts, w.s)
	}
	s.nested(word{s: strings.Join(parts, " ")}, n)
}

// wrapped is a command found inside a wrapper such as env, nohup, timeout
// or xargs.
type wrapped struct {
	inner  []word
	floor  Decision // the wrapper's own decision
	reason string
	script *word // a script the wrapper runs too (env -S)
}

// unwrap returns the command a wrapper runs, or false when base is not a
// wrapper.
func unwrap(base string, a []word) (wrapped, bool) {
	skip := func(i int, valued ...string) int {
		for i < len(a) {
			t := a[i].s
			if t == "--" {
				return i + 1
			}
			if !a[i].static() || len(t) < 2 || t[0] != '-' {
				return i
			}
			if slices.Contains(valued, t) {
				i++
			}
			i++
		}
		return min(i, len(a))
	}
	switch base {
	case "command":
		if len(a) > 1 && (a[1].s == "-v" || a[1].s == "-V") {
			return wrapped{}, true // looks a name up
		}
		return wrapped{inner: a[skip(1):]}, true
	case "builtin", "exec", "busybox", "unbuffer", "caffeinate", "stdbuf", "chronic":
		return wrapped{inner: a[skip(1, "-a", "-i", "-o", "-e", "-w", "-t"):]}, true
	case "nice":
		return wrapped{inner: a[skip(1, "-n", "--adjustment"):]}, true
	case "ionice":
		return wrapped{inner: a[skip(1, "-c", "-n", "--class", "--classdata"):]}, true
	case "nohup":
		return wrapped{inner: a[skip(1):], floor: Ask, reason: "keeps running after the shell ends"}, true
	case "setsid":
		return wrapped{inner: a[skip(1):], floor: Ask, reason: "starts a new session, outside the process group that is killed at the end"}, true
	case "timeout":
		i := skip(1, "-s", "-k", "--signal", "--kill-after")
		if i < len(a) {
			i++ // the duration
		}
		return wrapped{inner: a[i:]}, true
	case "time":
		i := skip(1, "-f", "--format", "-o", "--output")
		w := wrapped{inner: a[i:]}
		for _, x := range a[1:i] {
			if x.s == "-o" || strings.HasPrefix(x.s, "--output") {
				w.floor, w.reason = Ask, "writes its timings to a file"
			}
		}
		return w, true
	case "xargs":
		i := skip(1, "-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n", "--max-args", "-P", "--max-procs", "-s", "--max-chars", "--process-slot-var")
		inner := append(slices.Clip(a[i:]), word{s: dyn})
		if i == len(a) {
			inner = []word{{s: "echo"}, {s: dyn}}
		}
		return wrapped{inner: inner}, true
	case "env":
		w := wrapped{}
		i := 1
	loop:
		for ; i < len(a); i++ {
			t := a[i].s
			switch {
			case !a[i].static():
				break loop
			case t == "--":
				i++
				break loop
			case t == "-u" || t == "--unset" || t == "-C" || t == "--chdir" || t == "-P":
				i++
			case t == "-S" || t == "--split-string":
				if i+1 < len(a) {
					rest := []string{a[i+1].s}
					for _, x := range a[i+2:] {
						rest = append(rest, x.s)
					}
					w.script = &word{s: strings.Join(rest, " ")}
				}
				return w, true
			case strings.HasPrefix(t, "-S") || strings.HasPrefix(t, "--split-string="):
				v := strings.TrimPrefix(strings.TrimPrefix(t, "--split-string="), "-S")
				rest := []string{v}
				for _, x := range a[i+1:] {
					rest = append(rest, x.s)
				}
				w.script = &word{s: strings.Join(rest, " ")}
				return w, true
			case strings.HasPrefix(t, "-"):
			case strings.Contains(t, "=") && syntax.ValidName(t[:strings.IndexByte(t, '=')]):
				w.floor, w.reason = Ask, "runs a command with variables set for it (PATH, LD_PRELOAD, ... change what runs)"
			default:
				break loop
			}
		}
		w.inner = a[min(i, len(a)):]
		return w, true
	}
	return wrapped{}, false
}

// positionals returns the arguments that are not options (everything after
// "--" counts).
func positionals(a []word) []word {
	var out []word
	opts := true
	for _, w := range a {
		if opts && w.s == "--" {
			opts = false
			continue
		}
		if opts && w.static() && len(w.s) > 1 && w.s[0] == '-' {
			continue
		}
		out = append(out, w)
	}
	return out
}

// writes denies writing into any of files that is a system, device or
// credential path, and asks otherwise.
func (s *scope) writes(files []word, n syntax.Node) {
	for _, w := range files {
		if pathRisk(s.resolve(w.s), s.c.home) == riskSystem {
			s.note(Deny, n, "writes into a system directory, a device or a credential directory")
			return
		}
	}
	s.note(Ask, n, "writes files")
}

// targets denies the command when one of its operands is at least as
// risky as worst, and asks otherwise.
func (s *scope) targets(a []word, n syntax.Node, worst risk, denied, asked string) {
	for _, w := range positionals(a[1:]) {
		if pathRisk(s.resolve(w.s), s.c.home) >= worst {
			s.note(Deny, n, denied)
			return
		}
	}
	s.note(Ask, n, asked)
}

func (s *scope) rm(a []word, n syntax.Node) {
	opts := true
	for _, w := range a[1:] {
		t := w.s
		switch {
		case opts && t == "--":
			opts = false
		case opts && t == "--no-preserve-root":
			s.note(Deny, n, "turns off rm's protection of /")
			return
		case opts && w.static() && len(t) > 1 && t[0] == '-':
		default:
			switch pathRisk(s.resolve(t), s.c.home) {
			case riskRoot:
				s.note(Deny, n, "deletes /, a top-level directory, a home directory or everything in one")
				return
			case riskSystem:
				s.note(Deny, n, "deletes in a system directory, a device or a credential directory")
				return
			}
		}
	}
	s.note(Ask, n, "deletes files")
}

func (s *scope) find(a []word, n syntax.Node) {
	i := 1
	for i < len(a) {
		t := a[i].s
		if t == "-H" || t == "-L" || t == "-P" || strings.HasPrefix(t, "-O") {
			i++
		} else if t == "-D" {
			i += 2
		} else {
			break
		}
	}
	var starts []word
	for ; i < len(a); i++ {
		t := a[i].s
		if strings.HasPrefix(t, "-") || t == "(" || t == "!" || t == ")" {
			break
		}
		starts = append(starts, a[i])
	}
	risky := false
	if len(starts) == 0 {
		starts = []word{{s: "."}}
	}
	for _, w := range starts {
		risky = risky || pathRisk(s.resolve(w.s), s.c.home) >= riskSystem
	}
	found := word{s: dyn} // what {} stands for
	if len(starts) == 1 && starts[0].static() {
		found = word{s: strings.TrimSuffix(s.resolve(starts[0].s), "/") + "/*"}
	}
	for ; i < len(a); i++ {
		w := a[i]
		if !w.static() {
			s.note(Ask, n, "has arguments only known when the shell runs")
			continue
		}
		switch w.s {
		case "-delete":
			if risky {
				s.note(Deny, n, "deletes everything it finds under a root, home, system or credential path")
			}
			s.note(Ask, n, "deletes the files it finds")
		case "-exec", "-execdir", "-ok", "-okdir":
			var inner []word
			for i++; i < len(a) && a[i].s != ";" && a[i].s != "+"; i++ {
				x := a[i]
				if strings.Contains(x.s, "{}") {
					x = word{s: strings.ReplaceAll(x.s, "{}", found.s)}
				}
				inner = append(inner, x)
			}
			s.note(Ask, n, "runs a command on each file it finds")
			s.argv(inner, n, nil)
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			s.note(Ask, n, "writes its findings to a file")
		}
	}
}

func (s *scope) dd(a []word, n syntax.Node) {
	for _, w := range a[1:] {
		if t, ok := strings.CutPrefix(w.s, "of="); ok && pathRisk(s.resolve(t), s.c.home) == riskSystem {
			s.note(Deny, n, "writes raw data to a disk, a device or a system file")
			return
		}
	}
	s.note(Ask, n, "copies raw data")
}

// copyInto judges cp/install/ln/rsync by their destination.
func (s *scope) copyInto(a []word, n syntax.Node) {
	var dest []string
	for i, w := range a[1:] {
		if w.s == "-t" && i+2 < len(a) {
			dest = append(dest, a[i+2].s)
		}
		if v, ok := strings.CutPrefix(w.s, "--target-directory="); ok {
			dest = append(dest, v)
		}
	}
	if p := positionals(a[1:]); len(p) > 1 {
		dest = append(dest, p[len(p)-1].s)
	}
	files := make([]word, len(dest))
	for i, d := range dest {
		files[i] = word{s: d}
	}
	s.writes(files, n)
}

// kill -9 -1 kills every process the user may signal.
func (s *scope) kill(a []word, n syntax.Node) {
	i := 1
	if i < len(a) && (a[i].s == "-s" || a[i].s == "-n") {
		i += 2
	} else if i < len(a) && len(a[i].s) > 1 && a[i].s[0] == '-' && a[i].s != "--" && a[i].s != "-1" {
		i++
	}
	for ; i < len(a); i++ {
		if a[i].s == "-1" {
			s.note(Deny, n, "signals every process of the user")
			return
		}
	}
	s.note(Ask, n, "signals processes")
}

// gitReadOnly are the git subcommands that only read, with their options
// still checked.
var gitReadOnly = map[string]bool{
	"status": true, "log": true, "diff": true, "show": true, "blame": true, "annotate": true,
	"shortlog": true, "describe": true, "rev-parse": true, "rev-list": true, "ls-files": true,
	"ls-tree": true, "cat-file": true, "grep": true, "show-ref": true, "for-each-ref": true,
	"merge-base": true, "name-rev": true, "check-ignore": true, "count-objects": true,
	"diff-tree": true, "diff-files": true, "diff-index": true, "whatchanged": true, "version": true,
}

// gitUnsafeOption makes a read-only git command write a file or run a
// program.
func gitUnsafeOption(t string) bool {
	for _, p := range []string{"--output", "--ext-diff", "--textconv", "--exec", "--paginate", "--open-files-in-pager", "--upload-pack", "--receive-pack", "--run"} {
		if t == p || strings.HasPrefix(t, p+"=") {
			return true
		}
	}
	return strings.HasPrefix(t, "-O")
}

func (s *scope) git(a []word, n syntax.Node) {
	i := 1
	for i < len(a) {
		t := a[i].s
		if t == "--no-pager" || t == "--no-optional-locks" || t == "--literal-pathspecs" {
			i++
		} else if t == "-C" && i+1 < len(a) {
			i += 2
		} else {
			break
		}
	}
	if i >= len(a) || !a[i].static() {
		s.note(Ask, n, "runs git with options that may change what it runs")
		return
	}
	sub, rest := a[i].s, a[i+1:]
	if strings.HasPrefix(sub, "-") {
		s.note(Ask, n, "runs git with options that may change what it runs (-c, --git-dir, ...)")
		return
	}
	for _, w := range rest {
		if !w.static() {
			s.note(Ask, n, "has arguments only known when the shell runs")
			return
		}
		if gitUnsafeOption(w.s) {
			s.note(Ask, n, "uses a git option that writes a file or runs a program")
			return
		}
	}
	ok := gitReadOnly[sub]
	switch sub {
	case "branch", "tag":
		ok = gitListing(sub, rest)
	case "remote":
		ok = len(rest) == 0 || len(rest) == 1 && (rest[0].s == "-v" || rest[0].s == "--verbose")
	case "stash", "worktree":
		ok = len(rest) > 0 && rest[0].s == "list"
	case "reflog":
		ok = len(rest) == 0 || rest[0].s == "show" || strings.HasPrefix(rest[0].s, "-")
	case "config":
		ok = gitConfigReads(rest)
	}
	if !ok {
		s.note(Ask, n, "git "+sub+" is not one of the read-only git commands")
	}
}

// gitListing reports whether git branch/tag only lists.
func gitListing(sub string, rest []word) bool {
	listing, positional := false, false
	for _, w := range rest {
		t := w.s
		switch {
		case t == "-l" || t == "--list" || t == "-a" || t == "--all" || t == "-r" || t == "--remotes" ||
			t == "-v" || t == "-vv" || t == "--verbose" || t == "--show-current" || t == "--no-color" ||
			strings.HasPrefix(t, "--sort=") || strings.HasPrefix(t, "--format=") || strings.HasPrefix(t, "--color") ||
			strings.HasPrefix(t, "--column") || strings.HasPrefix(t, "-n"):
			listing = listing || t == "-l" || t == "--list"
		case t == "--contains" || t == "--no-contains" || t == "--merged" || t == "--no-merged" || t == "--points-at":
			listing = true
		case strings.HasPrefix(t, "-"):
			return false
		default:
			positional = true
		}
	}
	return !positional || listing
}

func gitConfigReads(rest []word) bool {
	reads := false
	for _, w := range rest {
		switch t := w.s; {
		case t == "--get" || t == "--get-all" || t == "--get-regexp" || t == "--list" || t == "-l" ||
			t == "--get-urlmatch" || t == "--get-color" || t == "--get-colorbool":
			reads = true
		case t == "get" || t == "list":
			reads = true
		case strings.HasPrefix(t, "--unset") || t == "--add" || t == "--replace-all" || t == "-e" ||
			t == "--edit" || strings.HasPrefix(t, "--rename") || strings.HasPrefix(t, "--remove") || t == "set" ||
			t == "unset" || t == "edit":
			return false
		}
	}
	return reads
}

// safeCommands only read, whatever their arguments.
var safeCommands = map[string]bool{
	"cat": true, "ls": true, "pwd": true, "echo": true, "printf": true, "head": true, "tail": true,
	"wc": true, "grep": true, "egrep": true, "fgrep": true, "cut": true, "tr": true, "nl": true,
	"rev": true, "seq": true, "stat": true, "basename": true, "dirname": true, "realpath": true,
	"readlink": true, "which": true, "whoami": true, "id": true, "groups": true, "uname": true,
	"du": true, "df": true, "diff": true, "cmp": true, "comm": true, "od": true, "md5sum": true,
	"sha1sum": true, "sha224sum": true, "sha256sum": true, "sha384sum": true, "sha512sum": true,
	"b2sum": true, "cksum": true, "test": true, "[": true, "expr": true, "column": true,
	"fold": true, "paste": true, "tac": true, "type": true, "printenv": true, "true": true,
	"false": true, ":": true, "cd": true, "pushd": true, "popd": true, "dirs": true, "sleep": true,
	"wait": true, "exit": true, "return": true, "strings": true, "jq": true, "locale": true,
	"nproc": true, "arch": true, "numfmt": true, "expand": true, "unexpand": true, "join": true,
	"fmt": true, "whereis": true, "ps": true, "uptime": true, "free": true, "cal": true,
	"getconf": true, "set": true, "shift": true, "read": true, "break": true, "continue": true,
	"file": true, "tree": true, "sort": true, "uniq": true, "date": true, "hostname": true,
	"base64": true, "rg": true, "sed": true, "go": true,
}

// safeArgs vetoes the options that make an otherwise read-only command
// write a file, run a program or change the system. Commands listed here
// are also not allowed with arguments computed at run time, which could
// turn into such options.
var safeArgs = map[string]func(a []word) bool{
	"file": func(a []word) bool { return !hasOption(a, "-C", "--compile") },
	"tree": func(a []word) bool { return !hasOption(a, "-o") },
	"sort": func(a []word) bool {
		return !hasOption(a, "-o", "--output", "--compress-program") && !hasPrefix(a, "--output=", "--compress-program=", "-o")
	},
	"uniq": func(a []word) bool { return len(positionals(a)) <= 1 },
	"date": func(a []word) bool {
		return !hasOption(a, "-s", "--set") && !hasPrefix(a, "--set=") && allPlus(positionals(a))
	},
	"hostname": func(a []word) bool { return len(positionals(a)) == 0 && !hasOption(a, "-F", "--file", "-b", "--boot") },
	"base64":   func(a []word) bool { return !hasOption(a, "-o", "--output") && !hasPrefix(a, "--output=") },
	"rg": func(a []word) bool {
		for _, w := range a {
			t := w.s
			if t == "--pre" || strings.HasPrefix(t, "--pre=") || t == "--pre-glob" || strings.HasPrefix(t, "--pre-glob=") ||
				t == "--hostname-bin" || strings.HasPrefix(t, "--hostname-bin=") || t == "--search-zip" ||
				len(t) > 1 && t[0] == '-' && t[1] != '-' && strings.ContainsRune(t, 'z') {
				return false
			}
		}
		return true
	},
	"sed": sedPrints,
	"go": func(a []word) bool {
		return len(a) == 1 && a[0].s == "version" || len(a) >= 1 && a[0].s == "env" && !hasOption(a, "-w", "-u")
	},
}

func hasOption(a []word, opts ...string) bool {
	for _, w := range a {
		if w.s == "--" {
			return false
		}
		if slices.Contains(opts, w.s) {
			return true
		}
	}
	return false
}

func hasPrefix(a []word, prefixes ...string) bool {
	for _, w := range a {
		for _, p := range prefixes {
			if strings.HasPrefix(w.s, p) {
				return true
			}
		}
	}
	return false
}

func allPlus(a []word) bool {
	for _, w := range a {
		if !strings.HasPrefix(w.s, "+") {
			return false
		}
	}
	return true
}

// sedPrints allows only sed -n with a script that prints line ranges
// ("10,20p", "$p"): other sed scripts can write files (w) or run commands (e).
func sedPrints(a []word) bool {
	quiet, script := false, ""
	var files int
	for i := 0; i < len(a); i++ {
		t := a[i].s
		switch {
		case t == "-n" || t == "--quiet" || t == "--silent":
			quiet = true
		case t == "-E" || t == "-r" || t == "--regexp-extended":
		case t == "-e" && i+1 < len(a) && script == "":
			i++
			script = a[i].s
		case strings.HasPrefix(t, "-"):
			return false
		case script == "":
			script = t
		default:
			files++
		}
	}
	if !quiet {
		return false
	}
	for _, cmd := range strings.Split(script, ";") {
		cmd = strings.TrimSpace(cmd)
		body, ok := strings.CutSuffix(cmd, "p")
		if !ok {
			return false
		}
		if strings.Trim(body, "0123456789,$") != "" {
			return false
		}
	}
	return true
}

// safe allows read-only commands and asks for everything else.
func (s *scope) safe(base string, a []word, n syntax.Node) {
	name := a[0].s
	if slices.Contains(s.c.p.Safe, name) || trusted(name) && slices.Contains(s.c.p.Safe, base) {
		return
	}
	if !trusted(name) {
		return // argv asked already
	}
	if !safeCommands[base] {
		s.note(Ask, n, base+" is not on the read-only list")
		return
	}
	for _, w := range a[1:] {
		if holdsSecrets(s.resolve(w.s), s.c.home) {
			s.note(Ask, n, "reads a file that usually holds credentials ("+w.s+")")
			return
		}
	}
	check, ok := safeArgs[base]
	if !ok {
		return
	}
	for _, w := range a[1:] {
		if !w.static() {
			s.note(Ask, n, "has arguments only known when the shell runs")
			return
		}
	}
	if !check(a[1:]) {
		if base == "go" {
			s.note(Ask, n, "only go version and go env run without approval (go build, test and run run code)")
			return
		}
		s.note(Ask, n, "uses an option that writes a file, runs a program or changes the system")
	}
}
