package shell

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// landlockABI is the kernel's Landlock ABI version, 0 for none (a variable
// for tests).
var landlockABI = sync.OnceValue(func() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
})

func noSandboxReason() string {
	return "this kernel has no Landlock: it needs Linux 5.13 or newer with Landlock enabled (lsm=landlock)"
}

// devices are the device files any command may read and write.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// ruleset builds the Landlock ruleset of p; the caller closes fd. fd is -1
// when the kernel enforces nothing.
func (p *sandboxPlan) ruleset() (fd int, flags uint32, err error) {
	cfg := landlock.V11
	if p.network {
		cfg.HandledAccessNet = 0
	}
	hide := realPaths(p.hide)
	var ro, rw coverage
	ro.cover("/", hide)
	for _, w := range realPaths(append([]string{p.workspace}, p.write...)) {
		rw.cover(w, hide)
	}
	rules := []landlock.Rule{
		landlock.RODirs(ro.dirs...).IgnoreIfMissing(),
		landlock.ROFiles(ro.files...).IgnoreIfMissing(),
		landlock.PathAccess(ll.AccessFSReadDir, append(ro.walked, rw.walked...)...).IgnoreIfMissing(),
		landlock.RWDirs(rw.dirs...).WithRefer().WithIoctlDev().WithResolveUnix().IgnoreIfMissing(),
		landlock.RWFiles(rw.files...).WithIoctlDev().WithResolveUnix().IgnoreIfMissing(),
		landlock.RWFiles(devices...).WithIoctlDev().IgnoreIfMissing(),
		landlock.RWDirs("/dev/shm").IgnoreIfMissing(),
	}
	return cfg.BestEffort().NewRulesetFD(rules...)
}

// startConfined starts cmd from a new OS thread restricted by p's ruleset:
// the child inherits the thread's Landlock domain, and the thread, never
// unlocked, ends with its goroutine, so no other goroutine runs on it.
func startConfined(cmd *exec.Cmd, p *sandboxPlan) error {
	fd, flags, err := p.ruleset()
	if err != nil {
		return &SandboxError{Reason: err.Error()}
	}
	if fd < 0 {
		return cmd.Start()
	}
	defer unix.Close(fd)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			started <- &SandboxError{Reason: fmt.Sprintf("prctl(PR_SET_NO_NEW_PRIVS): %v", err)}
			return
		}
		if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
			if errors.Is(err, unix.E2BIG) {
				err = errors.New("too many nested Landlock sandboxes")
			}
			started <- &SandboxError{Reason: fmt.Sprintf("landlock_restrict_self: %v", err)}
			return
		}
		started <- cmd.Start()
	}()
	return <-started
}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}
