//go:build !linux

package fs

import "os"

// fdPath cannot tell the path of an open file on this system: the file
// tools check the path they open, with its links resolved, only.
func fdPath(*os.File) (string, bool) { return "", false }
