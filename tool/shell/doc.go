// Package shell provides the bash tool of the coding toolset: it runs a
// command with bash -c in the workspace, under a [Policy] that lets
// read-only commands run without approval, asks about everything else, and
// refuses destructive commands even when everything is approved.
//
// # The tool
//
// bash {command, timeout_ms?} (see [New] and [Args]) runs the command with:
//   - standard input from /dev/null: a command waiting for input gets
//     end-of-file at once;
//   - standard output and error merged in one pipe, in the order written;
//     the result keeps the first and last [Config].MaxOutput bytes with a
//     line saying how much was cut, and memory stays bounded whatever the
//     command prints; a command printing more than KillOutput is killed;
//   - a time limit (default 2 minutes, at most 10);
//   - its own process group, killed with SIGKILL when bash ends, times out
//     or the call's context is done, so background jobs (nohup sleep &) do
//     not outlive the call; on Linux, processes that left the group (setsid,
//     double-forked daemons) are found by a variable in their environment,
//     LOOM_SHELL_CALL, and killed too;
//   - an environment without credentials (see [ScrubEnv]: *_API_KEY,
//     *_TOKEN, *_SECRET, *_PASSWORD, AWS_*, SSH_AUTH_SOCK, URLs with
//     passwords, ...), with GIT_TERMINAL_PROMPT=0 and PAGER=cat.
//
// The result is the output followed by "[exit code N]"; a non-zero exit, a
// timeout or a kill makes it an error result, which the model reads and can
// act on.
//
// # The policy and the sandbox
//
// The policy is a guard, not a sandbox. It reads the command's text; it
// cannot know what a script, a Makefile, a test or a program built at run
// time will do, so those are Ask, and a driver that approves every Ask runs
// them with the user's full rights, unless [Config].Sandbox is set: then,
// on Linux with Landlock, the kernel confines each command and everything
// it starts (see [Sandbox]): writes only in the workspace and the temporary
// and cache directories, no reading of credential files, no network.
// Without a sandbox (or where the kernel has none) a command can read
// ~/.ssh, delete files outside the workspace and reach the network.
// Read-only commands that run without approval
// still honour their configuration: git status runs core.fsmonitor and git
// diff runs textconv drivers set in .git/config, so writing .git/config
// needs approval (a redirect to it is Ask, and so is the file tools' write).
// A process that both leaves the process
// group and rewrites its environment can outlive the call; only a PID
// namespace or a cgroup would catch it. Killed processes whose parent is
// gone are reaped by init; when loom itself runs as PID 1 (a container
// without --init), nobody reaps them and they stay as zombies.
//
// [Tool] is safe for concurrent use: each call runs its own bash.
package shell
