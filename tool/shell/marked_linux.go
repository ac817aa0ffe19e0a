package shell

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// killMarked kills every process whose environment carries markerVar with
// the value marker: those that escaped the process group with setsid or a
// double fork. It repeats until none is left, as one may fork while it is
// being killed. A process that rewrote its environment (env -i, exec with
// a new one) is not found: only a PID namespace or a cgroup would find it.
func killMarked(marker string) {
	want := []byte(markerVar + "=" + marker + "\x00")
	self := os.Getpid()
	for range 10 {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		killed := 0
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil || !bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		if killed == 0 {
			return
		}
	}
}
