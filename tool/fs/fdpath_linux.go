package fs

import (
	"os"
	"strconv"
	"strings"
)

// fdPath returns the path of the open file f as the kernel tells it
// (/proc/self/fd), and false when it cannot.
func fdPath(f *os.File) (string, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return "", false
	}
	var p string
	var rerr error
	if err := rc.Control(func(fd uintptr) {
		p, rerr = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil || rerr != nil || !strings.HasPrefix(p, "/") {
		return "", false
	}
	return p, true
}
