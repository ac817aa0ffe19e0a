//go:build unix

package cli

import (
	"errors"
	"syscall"
)

// processGone reports whether no process with this id exists.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
