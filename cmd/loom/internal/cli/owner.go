package cli

import (
	"os"
	"strconv"
	"strings"
)

// ownerGone reports whether owner (a claim holder named by newOwner) is a
// loom process of this machine that no longer exists: a loom that was
// killed. Its claim would lapse by itself after a minute; knowing the
// process is gone, loom resume can take the run over at once.
func ownerGone(owner string) bool {
	parts := strings.Split(owner, ":")
	if len(parts) < 4 || parts[0] != "loom" {
		return false
	}
	host, _ := os.Hostname()
	if strings.Join(parts[1:len(parts)-2], ":") != host {
		return false
	}
	pid, err := strconv.Atoi(parts[len(parts)-2])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return processGone(pid)
}
