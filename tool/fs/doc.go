// Package fs provides loom's file tools, confined to one workspace
// directory through an [os.Root]: read_file, write_file, edit_file,
// list_dir, glob and grep. Their names and arguments are fixed; the CLI and
// the model rely on them.
//
//	read_file  {path, offset?, limit?}           lines numbered like cat -n
//	write_file {path, content}                   atomic: temp file + rename
//	edit_file  {path, old_string, new_string, replace_all?}
//	list_dir   {path?}
//	glob       {pattern}                         ** matches any depth
//	grep       {pattern, path?, include?}        Go regexp (RE2)
//
// Paths are relative to the workspace root and use forward slashes. An
// absolute path is accepted only when it names something under the
// workspace directory. Every failure is an error result saying what
// happened and what to do instead.
//
// # What is refused
//
// Every file operation goes through one [os.Root], which resolves each path
// component itself (openat with O_NOFOLLOW, symbolic links followed in user
// space) and refuses any that would leave the root: "..", absolute paths,
// symbolic links pointing outside (also dangling ones, and "link/" with a
// trailing slash; see the go.mod note on the Go version), and directories
// swapped for symbolic links while a write is under way. Before os.Root is
// asked, paths with NUL bytes, line breaks, backslashes, Windows drive or
// device prefixes (C:\x, \\?\C:\x) and paths longer than 4,096 bytes are
// refused, and so are Windows device names (NUL, COM1, CONOUT$, ...) as
// names of new files. read_file refuses directories, FIFOs, sockets and
// devices without blocking (the file is opened with O_NONBLOCK and checked
// after opening), reads at most [Options].MaxFileSize bytes, and says
// "binary file" instead of dumping bytes. glob and grep do not follow
// symbolic links, skip .git, and are bounded in what they visit and print.
//
// # What os.Root does not stop
//
// os.Root confines names, not the kernel's view of the world. It does not
// stop: bind mounts and mount points inside the workspace (they are
// ordinary directories to it); /proc-like special files mounted inside;
// device files that exist inside the workspace (read_file refuses them,
// but nothing else here is about devices); hard links created beforehand
// that make an outside inode appear inside (they read and write like any
// file); a process outside the tools (the shell tool, a build) that follows
// a symbolic link os.Root refused. The file tools are a guard against a
// model's mistakes and against hostile repositories, not an OS sandbox.
//
// # Approval
//
// write_file and edit_file implement [tool.Approvable]: a write needs
// approval when the path, or what its symbolic links resolve to, is
// protected: .git and anything in it, .env files, and the files that
// instruct or configure an agent (AGENTS.md, LOOM.md, .loom/, .mcp.json);
// see [DefaultProtected]. A repository that can plant a git hook or agent
// setting can run code on the next start (CVE-2026-25725 is that pattern).
//
// # Effects
//
// read_file, list_dir, glob and grep are read-only. write_file is
// idempotent: the same path and content leave the same file. edit_file is
// destructive: with replace_all, or when new_string contains old_string,
// running it twice changes the file twice.
//
// A [Toolset] and its tools are safe for concurrent use.
package fs
