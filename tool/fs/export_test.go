package fs

// SetRunHook makes ts call f whenever one of its tools' functions starts.
func SetRunHook(ts *Toolset, f func()) { ts.onRun = f }

// CheckGoVersion is checkGoVersion, for tests.
var CheckGoVersion = checkGoVersion
