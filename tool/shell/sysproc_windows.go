//go:build windows

package shell

import (
	"os"
	"os/exec"
)

// setProcessGroup does nothing on Windows: there are no process groups to
// kill at once, only the shell itself is killed.
func setProcessGroup(cmd *exec.Cmd) {}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

func exitSignal(ps *os.ProcessState) string { return "" }
