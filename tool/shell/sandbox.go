package shell

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/loomkit/loom/internal/sensitive"
)

// Sandbox confines the commands of the bash tool with the operating system,
// so that what the policy cannot see (a script, a test, a program built at
// run time, a symlink made earlier) is still held back by the kernel. On
// Linux it uses Landlock (kernel 5.13 or newer; blocking the network needs
// 6.7): each command starts from a thread restricted just for it, so the
// restriction binds the command and everything it starts, never loom
// itself. A confined command:
//   - may read and run everything except the [Sandbox.Hide] paths, whose
//     reads fail with "Permission denied" however they are reached
//     (a symlink the model made, a script, cd); the names in a hidden
//     directory can still be listed, since its parent must stay listable;
//   - may change files only in the workspace and the [Sandbox.Write]
//     directories (and /dev/null, /dev/shm and the like), except Hide
//     paths; in a directory that directly holds a hidden path (the home
//     directory as the workspace, say) existing entries can be changed but
//     none created, renamed or removed, since Landlock grants rights to
//     whole hierarchies;
//   - cannot open or accept TCP connections unless [Sandbox.Network] is
//     set (UDP, and so DNS, is only blocked on kernels with Landlock ABI 10);
//   - cannot signal processes or reach abstract UNIX sockets outside its
//     sandbox (Landlock ABI 6).
//
// The zero value is a sensible sandbox. Where the kernel has no Landlock
// (other systems, old or locked-down kernels), commands run unconfined
// unless [Sandbox.Require] is set; [SandboxLevel] tells what this machine
// enforces.
type Sandbox struct {
	// Write lists directories commands may change besides the workspace.
	// nil is [DefaultWrite]: the temporary directory and the user's cache
	// directory (where build caches such as Go's live); an empty, non-nil
	// list allows the workspace only.
	Write []string
	// Hide lists files and directories commands may neither read nor
	// change, even inside the workspace or a Write directory. nil is
	// [DefaultHidden] of the user's home directory.
	Hide []string
	// Network lets commands open and accept TCP connections.
	Network bool
	// Require refuses to run a command the kernel cannot confine as asked
	// (no Landlock, or no network rules while Network is off): the call
	// fails with an error result instead of running unconfined.
	Require bool
}

// DefaultHidden returns the paths a sandbox hides by default: the
// credential stores under home (keys, cloud and registry logins, password
// stores) and the system's password and sudo files.
func DefaultHidden(home string) []string { return sensitive.Credentials(home) }

// DefaultWrite returns the directories a sandbox lets commands change by
// default, besides the workspace: the temporary directory and the user's
// cache directory.
func DefaultWrite() []string {
	dirs := []string{os.TempDir()}
	if d, err := os.UserCacheDir(); err == nil {
		dirs = append(dirs, d)
	}
	return dirs
}

// SandboxLevel describes what a [Sandbox] enforces on this machine:
// "landlock ABI N: files, network, signals" or "none (...)". ok is false
// when commands would run unconfined.
func SandboxLevel() (desc string, ok bool) {
	abi := landlockABI()
	if abi < 1 {
		return "none (" + noSandboxReason() + ")", false
	}
	parts := []string{"files"}
	if abi >= 4 {
		parts = append(parts, "network")
	}
	if abi >= 6 {
		parts = append(parts, "signals")
	}
	return "landlock ABI " + strconv.Itoa(abi) + ": " + strings.Join(parts, ", "), true
}

// SandboxError is the error of a call the sandbox kept from running: the
// kernel cannot confine it as asked and [Sandbox.Require] is set, or the
// rules could not be built.
type SandboxError struct{ Reason string }

func (e *SandboxError) Error() string {
	return "The command was not run: the sandbox could not confine it (" + e.Reason + ")."
}

// sandboxPlan is a Sandbox with its defaults filled in, for one command.
type sandboxPlan struct {
	workspace string
	write     []string
	hide      []string
	network   bool
}

// plan fills in the defaults of s for a command running in dir ("" is the
// current directory), or fails when it cannot run as s asks.
func (s *Sandbox) plan(dir string) (*sandboxPlan, error) {
	abi := landlockABI()
	need := 1
	if !s.Network {
		need = 4
	}
	if abi < need {
		if s.Require {
			reason := noSandboxReason()
			if abi >= 1 {
				reason = "the kernel's Landlock ABI " + strconv.Itoa(abi) + " has no network rules; ABI 4 (Linux 6.7) has"
			}
			return nil, &SandboxError{Reason: reason}
		}
		if abi < 1 {
			return nil, nil
		}
	}
	p := &sandboxPlan{workspace: dir, network: s.Network}
	if p.workspace == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, &SandboxError{Reason: "no working directory: " + err.Error()}
		}
		p.workspace = wd
	}
	p.write = s.Write
	if p.write == nil {
		p.write = DefaultWrite()
	}
	p.hide = s.Hide
	if p.hide == nil {
		home, _ := os.UserHomeDir()
		p.hide = DefaultHidden(home)
	}
	return p, nil
}

// realPaths resolves each path to its absolute, symlink-free form; paths
// that do not exist are kept cleaned and absolute.
func realPaths(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		a, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if r, err := filepath.EvalSymlinks(a); err == nil {
			a = r
		} else if !errors.Is(err, os.ErrNotExist) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// within reports whether p is base or below it.
func within(p, base string) bool {
	return p == base || base == "/" || strings.HasPrefix(p, base+"/")
}

// coverage is a set of paths to grant access below.
type coverage struct {
	dirs, files []string
	// walked are the directories split into their entries because
	// something hidden is below them: they are granted listing only, since
	// a Landlock rule holds for a whole hierarchy, so granting more there
	// (creating a file, say) would grant it in the hidden directory too.
	walked []string
}

// cover adds to c the paths whose hierarchies together are everything below
// root except the hidden paths: the top itself when nothing hidden is below
// it, otherwise its entries, recursively. Symlinks among the entries are
// replaced by their targets, and dropped when a target is or holds
// something hidden, since a rule on a link would grant what it points to.
// All paths are real (see realPaths).
func (c *coverage) cover(root string, hidden []string) {
	c.coverEntry(root, nil, hidden)
}

// coverEntry is cover with root's directory entry, when known, to spare
// a stat.
func (c *coverage) coverEntry(root string, e os.DirEntry, hidden []string) {
	for _, h := range hidden {
		if within(root, h) {
			return
		}
	}
	if !holdsHidden(root, hidden) {
		if e != nil {
			c.addKind(root, e.IsDir())
		} else {
			c.add(root)
		}
		return
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return // unreadable: nothing to grant
	}
	c.walked = append(c.walked, root)
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if e.Type()&os.ModeSymlink == 0 {
			c.coverEntry(p, e, hidden)
			continue
		}
		t, err := filepath.EvalSymlinks(p)
		if err != nil || holdsHidden(t, hidden) {
			continue
		}
		hiddenTarget := false
		for _, h := range hidden {
			hiddenTarget = hiddenTarget || within(t, h)
		}
		if !hiddenTarget {
			c.add(t)
		}
	}
}

// holdsHidden reports whether a hidden path lies strictly below dir.
func holdsHidden(dir string, hidden []string) bool {
	for _, h := range hidden {
		if h != dir && within(h, dir) {
			return true
		}
	}
	return false
}

func (c *coverage) add(p string) {
	if fi, err := os.Stat(p); err == nil {
		c.addKind(p, fi.IsDir())
	}
}

func (c *coverage) addKind(p string, dir bool) {
	if dir {
		c.dirs = append(c.dirs, p)
	} else {
		c.files = append(c.files, p)
	}
}
