// Package mcp connects loom to the Model Context Protocol, both ways, on the
// official go-sdk (github.com/modelcontextprotocol/go-sdk).
//
// # Using the tools of MCP servers
//
// [Connect] reaches one server, described by a [ServerConfig]: a command
// run over stdio (Command, Args, Env, Dir) or a streamable HTTP endpoint
// (URL, Headers). [ConnectAll] reaches several at once as a [Group].
// [ParseConfig] and [LoadConfigFile] read the .mcp.json format other MCP
// clients use, and [ParseFlag] a NAME=COMMAND ARGS... flag value.
//
// Each tool of a server becomes a [tool.Tool]:
//
//   - Its name is <server>_<tool> with every character outside
//     [a-zA-Z0-9_-] replaced by '_', which the providers accept
//     (^[a-zA-Z0-9_-]{1,64}$). A name longer than 64 characters is cut and
//     ends with '_' and 8 hex digits of a hash of the server and tool
//     names; two names that come out the same (fs.read and fs_read) get
//     that hash too, except one that needed no change. Names depend only
//     on the set of tools, never on their order, and the original name is
//     what is sent to the server on call.
//   - Its schema is the server's input schema, passed through. It is
//     resolved with jsonschema-go once, when the tools are listed (again
//     only when a listing brings a new schema for the tool), and the
//     arguments of every call are validated against it before anything
//     is sent: arguments it refuses (a missing required field, a wrong
//     type, an unknown field where additionalProperties is false) give an
//     error result naming the field and the rule, saying the tool was not
//     run and quoting the schema (cut at 4,000 bytes), and the server
//     never sees the call. A schema jsonschema-go cannot resolve (a remote
//     $ref, a pattern that is not RE2, a keyword of a shape it does not
//     know) does not block the tool: its arguments go to the server
//     unvalidated, and [Options].Logger gets one warning naming the
//     server, the tool and the reason.
//   - Its effect comes from the server's annotations: readOnlyHint makes
//     it [llm.EffectReadOnly], idempotentHint [llm.EffectIdempotent], and
//     anything else, including no annotations, [llm.EffectDestructive].
//     It needs approval unless it is read-only. Annotations are the
//     server's claims; loom cannot check them.
//   - A call returns an error result, never a Go error, for every failure:
//     the server's own (isError), a protocol error, a cancelled context (the
//     server is sent notifications/cancelled and the call returns at
//     once), a server that died or became unreachable during the call.
//     The next call after such a death restarts a stdio server or opens a
//     new HTTP session; if that fails the result says the server is gone
//     and why (exit status, the end of its stderr). A call is never
//     retried by this package.
//   - Text blocks are joined by newlines into the result's text. An image
//     block becomes one of the result's [llm.ToolResult].Images, which the
//     model adapters send to the model, and a line such as
//     "[image 1: image/png, 1234 bytes]" in the text, so that what reads
//     only text knows it is there. An image is left out, its line saying
//     why, when its MIME type is not an image type, when it is larger than
//     [MaxImageBytes], or when its bytes are not PNG, JPEG, GIF or WebP
//     (the formats the providers take: a refused image would fail every
//     later request of the run). The media type sent is the one its bytes
//     show, so an image labelled image/jpg goes as image/jpeg. Audio stays
//     a placeholder line (the model does not hear it); a resource link
//     becomes its URI; an embedded text resource its text; structured
//     content is added as JSON when no text block carries it. Text longer
//     than [Options].MaxResultBytes keeps its head and tail; images do not
//     count towards that limit.
//
// A server may announce that its tools changed
// (notifications/tools/list_changed). The client then lists them again in
// the background; [Client.Tools] (or [Group.Tools]) returns the new set and
// [Client.Changed] (or [Group.Changed]) receives a value. A driver reads
// Tools between turns, so a model never sees the set change within one.
//
// A stdio server runs in its own process group. [Client.Close] closes its
// stdin, waits [Options].TerminateGrace, sends SIGTERM to the group, waits
// again, then SIGKILL, and returns once the process is reaped; anything
// the server left running in its group is killed when it exits.
//
// # Serving loom tools
//
// [NewServer] serves any []tool.Tool over MCP: [Server.ServeStdio] (or
// [Serve]) over stdin and stdout, [Server.Handler] (or [NewHandler]) as an
// http.Handler speaking streamable HTTP. Specs map to MCP tools (name,
// description, input schema, [Annotations] from the effect); results map to
// one text block with isError as the tool set it, followed by an image block
// for each of the result's images given by bytes and a resource link for
// each given by URL (the text block is left out when it is empty and there
// are images). Cancellation by the client cancels the tool's context.
//
// # Concurrency
//
// Client, Group and Server are safe for concurrent use, and so are the
// tools they return.
package mcp
