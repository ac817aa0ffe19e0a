package ui

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/loomkit/loom/llm"
)

// CallSummary is what a tool call line shows after the tool's name:
// ": go test ./..." for bash, ": main.go" for the file tools, the pattern
// for glob and grep, the URL for web_fetch, and the arguments in brief for
// any other tool. It is "" when there is nothing to show.
func CallSummary(c llm.ToolCall) string {
	var args map[string]any
	if json.Unmarshal([]byte(c.Arguments), &args) != nil {
		if strings.TrimSpace(c.Arguments) == "" {
			return ""
		}
		return ": " + firstLine(c.Arguments, 80) + " (not valid JSON)"
	}
	str := func(k string) string { s, _ := args[k].(string); return s }
	var s string
	switch c.Name {
	case "bash":
		s = str("command")
	case "read_file", "write_file", "edit_file":
		s = str("path")
	case "list_dir":
		s = str("path")
		if s == "" {
			s = "."
		}
	case "glob":
		s = str("pattern")
	case "grep":
		s = str("pattern")
		if p := str("path"); p != "" {
			s += " in " + p
		}
	case "web_fetch":
		s = str("url")
	default:
		if len(args) == 0 {
			return ""
		}
		b, _ := json.Marshal(args)
		s = string(b)
	}
	if s == "" {
		return ""
	}
	return ": " + firstLine(s, 120)
}

var exitCode = regexp.MustCompile(`\[exit code (-?\d+)\]\s*$`)

// ResultSummary is the short line shown under a tool call: the first line
// of an error, the exit code and size of a command's output, the number of
// lines read, or the first line of any other result.
func ResultSummary(name string, r llm.ToolResult) string {
	content := strings.TrimRight(r.Content, "\n")
	if r.IsError {
		return firstLine(content, 160)
	}
	switch name {
	case "bash":
		code := "0"
		if m := exitCode.FindStringSubmatch(content); m != nil {
			code = m[1]
			content = strings.TrimRight(content[:len(content)-len(m[0])], "\n")
		}
		if content == "" {
			return "exit " + code + ", no output"
		}
		n := strings.Count(content, "\n") + 1
		if n == 1 {
			return "exit " + code + ": " + firstLine(content, 120)
		}
		return fmt.Sprintf("exit %s, %s of output", code, plural(n, "line"))
	case "read_file":
		return "read " + plural(strings.Count(content, "\n")+1, "line")
	case "list_dir":
		if m := entries.FindStringSubmatch(content); m != nil {
			return m[1] + " entries"
		}
	case "glob", "grep":
		if content != "" && !strings.HasPrefix(content, "No ") {
			what := "line"
			if name == "glob" {
				what = "path"
			}
			return fmt.Sprintf("%s: %s", plural(strings.Count(content, "\n")+1, what), firstLine(content, 100))
		}
	}
	if content == "" {
		return "(empty)"
	}
	first, rest, more := strings.Cut(strings.TrimLeft(content, " \t\n"), "\n")
	line := firstLine(first, 120)
	if more {
		return fmt.Sprintf("%s (+%s)", line, plural(strings.Count(rest, "\n")+1, "line"))
	}
	return line
}

var entries = regexp.MustCompile(`^\S.* \((\d+) entries\):`)

// firstLine returns the first non-empty line of s, made safe for a
// terminal (see Sanitize), cut to max bytes (on a rune boundary) with an
// ellipsis.
func firstLine(s string, max int) string {
	s = Sanitize(strings.ToValidUTF8(s, "\uFFFD"))
	s = strings.TrimLeft(s, " \t\n")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// Sanitize makes text from a model or a tool safe to write to a terminal:
// carriage returns are dropped and other control characters (escape
// sequences could move the cursor, retitle the window or hide text) become
// '?'; line feeds and tabs stay.
func Sanitize(s string) string {
	clean := true
	for _, r := range s {
		if isControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\r':
			return -1
		case isControl(r):
			return '?'
		}
		return r
	}, s)
}

func isControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f)
}
