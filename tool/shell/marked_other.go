//go:build !linux

package shell

// killMarked does nothing where there is no /proc to find processes by
// their environment: only the process group is killed.
func killMarked(marker string) {}
