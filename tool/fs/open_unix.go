//go:build unix

package fs

import "syscall"

// nonblock keeps open from waiting on a FIFO's writer or a device; it
// changes nothing for regular files and directories.
const (
	nonblock    = syscall.O_NONBLOCK
	directoryOf = syscall.O_DIRECTORY
)
