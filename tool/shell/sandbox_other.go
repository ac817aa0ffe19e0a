//go:build !linux

package shell

import (
	"os/exec"
	"runtime"
)

// landlockABI is 0: Landlock is Linux's (a variable for tests).
var landlockABI = func() int { return 0 }

func noSandboxReason() string {
	return "loom's sandbox uses Linux Landlock, which " + runtime.GOOS + " does not have"
}

func startConfined(cmd *exec.Cmd, p *sandboxPlan) error { return cmd.Start() }

func (p *sandboxPlan) ruleset() (fd int, flags uint32, err error) { return -1, 0, nil }

func closeFD(int) {}
