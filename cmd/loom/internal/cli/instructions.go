package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
)

// InstructionFiles are the project instruction files read from the
// workspace root, in this order, and added to the system prompt.
var InstructionFiles = []string{"AGENTS.md", "LOOM.md"}

// Limits of instruction files: what one file may hold, how deep @imports
// nest, and the total added to the system prompt.
const (
	maxInstructionFile  = 64 << 10
	maxInstructionDepth = 3
	maxInstructionTotal = 256 << 10
)

// importLine is a line that imports another file: "@docs/style.md".
var importLine = regexp.MustCompile(`^@(\S+)\s*$`)

// basePrompt is loom's system prompt; %s is the workspace directory.
const basePrompt = `You are loom, a coding agent working in a software project on the user's machine.

The workspace is %s: the file tools (read_file, write_file, edit_file, list_dir, glob, grep) take paths relative to it and cannot leave it, and bash runs there.

- Look before you change: read the files, list the directories and search the code you are about to change.
- Use edit_file for changes to existing files and write_file for new ones.
- After changing code, build it or run its tests with bash when you can, and fix what fails.
- Some tool calls need the user's approval. When a call is denied, its result says why: do not repeat it; explain what you wanted to do, or choose another way.
- Be brief. When you are done, say what you changed and how you checked it.`

// systemPrompt is the system prompt of a run: custom (from --system) or
// loom's own, followed by the project's instruction files.
func systemPrompt(custom, workspace, instructions string) string {
	s := custom
	if s == "" {
		s = fmt.Sprintf(basePrompt, workspace)
	}
	if instructions != "" {
		s += "\n\n" + instructions
	}
	return s
}

// readInstructions reads the instruction files at the workspace root,
// and the files they import with "@path" lines, through an os.Root: a
// path or symbolic link that leads out of the workspace is not followed,
// so an instruction file cannot smuggle ~/.ssh/id_rsa into the prompt.
// Special files (FIFOs, devices) are refused without blocking. What cannot
// be read is left out, and said in the warnings.
func readInstructions(dir string) (text string, warnings []string) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", []string{fmt.Sprintf("cannot open the workspace for instruction files: %v", err)}
	}
	defer root.Close()
	r := &instructionReader{root: root}
	var parts []string
	for _, name := range InstructionFiles {
		body, err := r.read(name, 0, nil)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			r.warnings = append(r.warnings, fmt.Sprintf("%s not added to the system prompt: %v", name, err))
			continue
		}
		parts = append(parts, fmt.Sprintf("# Project instructions (%s)\n\n%s", name, strings.TrimSpace(body)))
	}
	return strings.Join(parts, "\n\n"), r.warnings
}

type instructionReader struct {
	root     *os.Root
	total    int
	warnings []string
}

func (r *instructionReader) read(name string, depth int, seen []string) (string, error) {
	for _, s := range seen {
		if s == name {
			return "", fmt.Errorf("it imports itself (through %s)", strings.Join(seen, " → "))
		}
	}
	b, err := readRegular(r.root, name, maxInstructionFile)
	if err != nil {
		return "", err
	}
	if r.total+len(b) > maxInstructionTotal {
		return "", fmt.Errorf("the instruction files would exceed %d KiB", maxInstructionTotal>>10)
	}
	r.total += len(b)
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		m := importLine.FindStringSubmatch(strings.TrimRight(line, "\r"))
		if m == nil {
			continue
		}
		if depth+1 > maxInstructionDepth {
			r.warnings = append(r.warnings, fmt.Sprintf("%s: @%s not imported: imports nest more than %d deep", name, m[1], maxInstructionDepth))
			continue
		}
		sub, err := r.read(m[1], depth+1, append(seen, name))
		if err != nil {
			r.warnings = append(r.warnings, fmt.Sprintf("%s: @%s not imported: %v", name, m[1], err))
			lines[i] = fmt.Sprintf("(@%s was not imported: it cannot be read from the workspace)", m[1])
			continue
		}
		lines[i] = strings.TrimRight(sub, "\n")
	}
	return strings.Join(lines, "\n"), nil
}

// readRegular reads at most max bytes of the regular file name in root.
func readRegular(root *os.Root, name string, max int64) ([]byte, error) {
	if strings.HasPrefix(name, "~") {
		return nil, errors.New("paths outside the workspace are not imported")
	}
	f, err := root.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && !errors.Is(err, fs.ErrNotExist) {
			return nil, pe.Err
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("larger than %d KiB", max>>10)
	}
	return b, nil
}
