//go:build !unix

package mcp

import "os/exec"

// setProcessGroup does nothing where there are no process groups.
func setProcessGroup(*exec.Cmd) {}

// terminateGroup kills the child: without process groups there is no
// gentler signal to send.
func terminateGroup(cmd *exec.Cmd) { killGroup(cmd) }

// killGroup kills the child (not what it started: without process groups
// loom cannot find those).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
