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
// # Credentials
//
// The credential stores the shell sandbox hides from commands (~/.ssh,
// ~/.aws, ~/.netrc, /etc/shadow, ...: [Options].Hidden) are refused to
// every tool when they lie inside the workspace (a workspace at the home
// directory), however a call names them: directly, by an absolute path,
// through symbolic links. list_dir of their parent shows their names; glob
// and grep pass them by and say so. On Linux each file and directory
// opened is checked again by the path the kernel gives it
// (/proc/self/fd), so a link swapped in during a call reaches nothing;
// elsewhere the path is checked with its links resolved just before it
// is opened. A hard link made beforehand is another name for the same
// file, and is not recognised.
//
// Environment files (.env, .env.local, .envrc, ...) hold secrets too:
// read_file needs approval to read one (by its name, or what a link
// resolves to), as bash needs it for cat .env, and so does grep when its
// path is one or its include pattern names them (its last element starts
// with .env); any other search passes them by and says so. On Linux the
// file a call names is checked again by its kernel path; the files a walk
// finds, by their names.
//
// # Approval
//
// read_file and grep implement [tool.Approvable] for environment files
// (see above). write_file and edit_file implement it too: a write needs
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
