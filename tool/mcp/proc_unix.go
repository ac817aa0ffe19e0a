//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// setProcessGroup makes the child the leader of a new process group.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminateGroup sends SIGTERM to the child's process group.
func terminateGroup(cmd *exec.Cmd) { signalGroup(cmd, syscall.SIGTERM) }

// killGroup sends SIGKILL to the child's process group.
func killGroup(cmd *exec.Cmd) { signalGroup(cmd, syscall.SIGKILL) }

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	// The group's id is the leader's pid. After the leader is reaped the
	// kernel does not reuse that id while the group has members, so this
	// reaches only what the server started.
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
