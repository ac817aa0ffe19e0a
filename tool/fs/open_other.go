//go:build !unix

package fs

const (
	nonblock    = 0
	directoryOf = 0
)
