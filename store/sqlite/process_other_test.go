//go:build !unix

package sqlite

// childMain does nothing where the crash tests, which need SIGKILL and
// resource limits, do not build.
func childMain() {}
