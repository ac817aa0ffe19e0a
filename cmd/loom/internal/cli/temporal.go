package cli

func (a *app) workerCmd(args []string) error  { return usagef("", "loom worker: not available yet") }
func (a *app) approveCmd(args []string) error { return usagef("", "loom approve: not available yet") }
func (a *app) temporalRun(o *options, prompt string) error {
	return usagef("", "--temporal: not available yet")
}
