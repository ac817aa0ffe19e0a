package fs

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/loomkit/loom/tool"
)

// Options configures a [Toolset]. The zero value gives the defaults.
type Options struct {
	// MaxFileSize is how many bytes of a file read_file reads and
	// edit_file edits at most: 0 means 32 MiB.
	MaxFileSize int64
	// MaxLines is how many lines read_file returns when the call gives no
	// limit: 0 means 2,000.
	MaxLines int
	// MaxLineLength is the length in bytes beyond which read_file and grep
	// cut a line: 0 means 2,000.
	MaxLineLength int
	// MaxResult is the size in bytes of a tool's result at most: 0 means
	// [tool.DefaultMaxResult].
	MaxResult int
	// MaxEntries is how many entries list_dir and glob return at most:
	// 0 means 1,000.
	MaxEntries int
	// MaxMatches is how many matching lines grep returns at most: 0 means
	// 500.
	MaxMatches int
	// MaxGrepFileSize is the size of the largest file grep searches; larger
	// ones are skipped and counted: 0 means 4 MiB.
	MaxGrepFileSize int64
	// MaxVisit is how many directory entries glob and grep visit at most
	// before they stop and say so: 0 means 200,000.
	MaxVisit int
	// Protected lists the glob patterns (see glob; matched without regard
	// to case) of paths whose writes need approval: nil means
	// [DefaultProtected]; an empty, non-nil slice protects nothing.
	Protected []string
	// WritesNeedApproval makes every write_file and edit_file call need
	// approval, protected or not.
	WritesNeedApproval bool
	// Hidden lists the absolute paths of the files and directories the
	// tools never read, list, search or change, as the shell sandbox
	// hides them from commands: nil means the credential stores of the
	// user's home and of the system ([sensitive.Credentials]); an empty,
	// non-nil slice hides nothing. A path counts with its links resolved,
	// and matters only when it is inside the workspace (or holds it).
	Hidden []string
}

// DefaultProtected are the paths whose writes need approval by default: git's
// internals (a hook or config runs code), environment files (they hold
// secrets, and tools load them), and the files that instruct or configure
// an agent (a planted setting runs code on the next start).
var DefaultProtected = []string{
	"**/.git", "**/.git/**",
	"**/.env*",
	"**/AGENTS.md", "**/LOOM.md",
	"**/.loom", "**/.loom/**",
	"**/.mcp.json",
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def64 := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def64(&o.MaxFileSize, 32<<20)
	def(&o.MaxLines, 2000)
	def(&o.MaxLineLength, 2000)
	def(&o.MaxResult, tool.DefaultMaxResult)
	def(&o.MaxEntries, 1000)
	def(&o.MaxMatches, 500)
	def64(&o.MaxGrepFileSize, 4<<20)
	def(&o.MaxVisit, 200_000)
	if o.Protected == nil {
		o.Protected = DefaultProtected
	}
	if o.Hidden == nil {
		o.Hidden = defaultHidden()
	}
	return o
}

// Toolset is the file tools over one workspace directory. It is safe for
// concurrent use. Close it when done; its tools fail after that.
type Toolset struct {
	root           *os.Root
	dir            string // absolute, symbolic links resolved
	opts           Options
	protectedGlobs []*globPattern
	tools          []tool.Tool
	hidden         []string // Hidden paths inside the root: lower-case slash paths
	allHidden      bool     // the root is itself inside a Hidden path

	onRun func() // test hook: called when a tool's function starts
}

// ErrUnsafeGo is returned by [New] when the program was built with a Go
// release whose os.Root can be escaped (CVE-2026-39822: a symbolic link
// with a trailing slash). Rebuild with Go 1.26.5, 1.25.12 or newer.
var ErrUnsafeGo = errors.New("this Go release's os.Root can be escaped through a symbolic link with a trailing slash (CVE-2026-39822); rebuild with Go 1.26.5, 1.25.12 or newer")

// New opens dir ("" is the current directory) as the workspace and returns
// its file tools. It returns a [*os.PathError] when dir cannot be opened,
// and [ErrUnsafeGo] on a Go release with a known os.Root escape. opts may
// be nil.
func New(dir string, opts *Options) (*Toolset, error) {
	if err := checkGoVersion(runtime.Version()); err != nil {
		return nil, err
	}
	if dir == "" {
		dir = "."
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	protected := make([]*globPattern, 0, len(o.Protected))
	for _, p := range o.Protected {
		g, err := compileGlob(strings.ToLower(p))
		if err != nil {
			return nil, fmt.Errorf("fs: protected pattern %q: %w", p, err)
		}
		protected = append(protected, g)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, err
	}
	ts := &Toolset{root: root, dir: abs, opts: o, protectedGlobs: protected}
	ts.hidden, ts.allHidden = hiddenPaths(abs, o.Hidden)
	ts.tools = []tool.Tool{ts.readFile(), ts.writeFile(), ts.editFile(), ts.listDir(), ts.glob(), ts.grep()}
	return ts, nil
}

// Tools returns read_file, write_file, edit_file, list_dir, glob and grep,
// in that order. The slice is the caller's.
func (ts *Toolset) Tools() []tool.Tool { return append([]tool.Tool(nil), ts.tools...) }

// ReadOnlyTools returns read_file, list_dir, glob and grep.
func (ts *Toolset) ReadOnlyTools() []tool.Tool {
	return []tool.Tool{ts.tools[0], ts.tools[3], ts.tools[4], ts.tools[5]}
}

// Dir returns the workspace directory: absolute, symbolic links resolved.
func (ts *Toolset) Dir() string { return ts.dir }

// Close closes the workspace root.
func (ts *Toolset) Close() error { return ts.root.Close() }

func (ts *Toolset) started() {
	if ts.onRun != nil {
		ts.onRun()
	}
}

// maxPath is the longest path accepted: Linux's PATH_MAX.
const maxPath = 4096

// rel turns a path from the model into a clean slash path relative to the
// root ("." for the root itself), or says why it cannot be one. It is not
// the security boundary (os.Root is); it gives clear messages for the
// common mistakes and refuses what os.Root would take differently on
// another system.
func (ts *Toolset) rel(p string, allowEmpty bool) (string, error) {
	if p == "" {
		if allowEmpty {
			return ".", nil
		}
		return "", errors.New("path is empty: give a path relative to the workspace root, e.g. src/main.go")
	}
	if len(p) > maxPath {
		return "", fmt.Errorf("path is %d bytes long; the longest accepted is %d", len(p), maxPath)
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q contains a NUL byte, which no file name can", p)
	}
	if strings.ContainsAny(p, "\n\r") {
		return "", fmt.Errorf("path %q contains a line break; file names with line breaks are refused", p)
	}
	if !utf8.ValidString(p) {
		return "", fmt.Errorf("path %q is not valid UTF-8", p)
	}
	if strings.HasPrefix(p, `\\`) || strings.HasPrefix(p, "//?/") || strings.HasPrefix(p, "//./") {
		return "", fmt.Errorf("path %q is a Windows device or network path; give a path relative to the workspace root", p)
	}
	if len(p) >= 2 && p[1] == ':' && ('a' <= p[0]|0x20 && p[0]|0x20 <= 'z') {
		return "", fmt.Errorf("path %q is a Windows drive path; give a path relative to the workspace root", p)
	}
	if strings.ContainsRune(p, '\\') {
		return "", fmt.Errorf("path %q contains a backslash; separate directories with forward slashes", p)
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		return "", fmt.Errorf("path %q starts with ~, which is not expanded and is outside the workspace; give a path relative to the workspace root", p)
	}
	if path.IsAbs(p) {
		inside, ok := ts.insideAbs(p)
		if !ok {
			return "", fmt.Errorf("%q is an absolute path outside the workspace (%s); give a path relative to the workspace root", p, ts.dir)
		}
		p = inside
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%q climbs out of the workspace with .., and paths outside the workspace are refused; give a path inside it", p)
	}
	if runtime.GOOS == "windows" {
		if err := checkDeviceNames(c); err != nil {
			return "", err
		}
	}
	return c, nil
}

// insideAbs returns p relative to the workspace when p names something
// under it.
func (ts *Toolset) insideAbs(p string) (string, bool) {
	c := path.Clean(filepath.ToSlash(p))
	d := filepath.ToSlash(ts.dir)
	if c == d {
		return ".", true
	}
	if rest, ok := strings.CutPrefix(c, strings.TrimSuffix(d, "/")+"/"); ok {
		return rest, true
	}
	return "", false
}

// checkDeviceNames refuses Windows device names (NUL, COM1, CONOUT$, ...)
// in any component, with or without an extension.
func checkDeviceNames(p string) error {
	for _, c := range strings.Split(p, "/") {
		base := strings.ToUpper(strings.TrimRight(c, " ."))
		if i := strings.IndexByte(base, '.'); i >= 0 {
			base = base[:i]
		}
		base = strings.TrimRight(base, " ")
		switch base {
		case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "CLOCK$":
			return fmt.Errorf("%q is a Windows device name, refused as a file name", c)
		}
		if len(base) == 4 && (strings.HasPrefix(base, "COM") || strings.HasPrefix(base, "LPT")) && strings.ContainsAny(base[3:], "0123456789¹²³") {
			return fmt.Errorf("%q is a Windows device name, refused as a file name", c)
		}
	}
	return nil
}

// pathErr turns an error from os.Root into a message for the model.
func pathErr(p string, err error) error {
	var errno syscall.Errno
	switch {
	case err == nil:
		return nil
	case isEscape(err):
		return fmt.Errorf("%q leads outside the workspace (through .., an absolute path or a symbolic link pointing out), which the file tools cannot reach", p)
	case errors.Is(err, iofs.ErrNotExist):
		return fmt.Errorf("%q does not exist; use list_dir or glob to find the right path", p)
	case errors.Is(err, iofs.ErrPermission):
		return fmt.Errorf("permission denied for %q", p)
	case errors.As(err, &errno) && errno == syscall.ENOTDIR:
		return fmt.Errorf("a component of %q is a file, not a directory", p)
	case errors.As(err, &errno) && errno == syscall.ELOOP:
		return fmt.Errorf("%q has too many levels of symbolic links", p)
	case errors.As(err, &errno) && errno == syscall.ENAMETOOLONG:
		return fmt.Errorf("a name in %q is too long for the file system", p)
	case errors.As(err, &errno) && errno == syscall.EISDIR:
		return fmt.Errorf("%q is a directory", p)
	}
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s %q: %v", pe.Op, p, pe.Err)
	}
	return fmt.Errorf("%q: %v", p, err)
}

// isEscape reports os.Root's refusal of a path that leaves it. The error is
// unexported in package os; its text is fixed.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// checkGoVersion refuses Go releases with CVE-2026-39822.
func checkGoVersion(v string) error {
	rest, ok := strings.CutPrefix(v, "go")
	if !ok {
		return nil // devel builds and others: trust them
	}
	rest, _, _ = strings.Cut(rest, " ")
	nums := strings.Split(rest, ".")
	if len(nums) < 2 {
		return nil
	}
	major, err1 := strconv.Atoi(nums[0])
	minorS := nums[1]
	if i := strings.IndexAny(minorS, "rcbeta"); i >= 0 {
		minorS = minorS[:i] // go1.27rc1
	}
	minor, err2 := strconv.Atoi(minorS)
	if err1 != nil || err2 != nil || major != 1 {
		return nil
	}
	patch := 0
	if len(nums) > 2 {
		patch, _ = strconv.Atoi(nums[2])
	}
	switch {
	case minor < 25, minor == 25 && patch < 12, minor == 26 && patch < 5:
		return fmt.Errorf("%w (running %s)", ErrUnsafeGo, v)
	}
	return nil
}
