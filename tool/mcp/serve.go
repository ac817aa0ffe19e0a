package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

// ServeOptions configure a [Server]. The zero value is usable; nil
// *ServeOptions means the zero value.
type ServeOptions struct {
	// Name and Version identify the server in the MCP handshake; empty
	// means "loom" and the module's version.
	Name, Version string

	// Instructions are sent to clients in the handshake, for their model.
	Instructions string

	// PageSize is the number of tools per tools/list page; zero means the
	// go-sdk's default (1000).
	PageSize int

	// Approve, when not nil, is asked before each call whose tool needs
	// approval for its arguments ([tool.NeedsApproval]); a call it refuses
	// is not run and the client gets an error result saying reason. When
	// nil every call runs: the MCP client is expected to ask its user,
	// guided by the annotations (every tool that is not read-only is
	// advertised as such).
	Approve func(ctx context.Context, spec llm.ToolSpec, args json.RawMessage) (ok bool, reason string)

	// Logger receives the go-sdk's diagnostics. Nil discards them.
	Logger *slog.Logger
}

// Server serves a set of loom tools over MCP: over stdio with
// [Server.ServeStdio] or [Server.ServeIO], and over streamable HTTP with
// [Server.Handler]. Each tool becomes an MCP tool of the same name whose
// input schema is the spec's schema and whose annotations come from its
// effect (see [Annotations]). A result becomes one text content block, with
// isError set as the tool set it. It is safe for concurrent use; one Server
// may serve many sessions at once.
type Server struct {
	srv  *sdk.Server
	opts ServeOptions

	mu    sync.Mutex
	names []string // the names served now
}

// NewServer returns a server of tools. It returns an error, and serves
// nothing, when a tool is nil, a name is not 1 to 64 letters, digits, '_'
// or '-', two tools share a name, or a schema is not a JSON object of type
// "object" (a tool with no schema is served with {"type":"object"}).
func NewServer(tools []tool.Tool, opts *ServeOptions) (*Server, error) {
	var o ServeOptions
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "loom"
	}
	if o.Version == "" {
		o.Version = version()
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: o}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: o.Name, Version: o.Version}, &sdk.ServerOptions{
		Instructions: o.Instructions,
		PageSize:     o.PageSize,
		Logger:       logger,
		// The tool set may change (SetTools); say so, so that clients
		// listen for tools/list_changed.
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}},
	})
	if err := s.SetTools(tools); err != nil {
		return nil, err
	}
	return s, nil
}

// SetTools replaces the tools served, with the checks of [NewServer]; on
// error nothing changes. Connected clients are sent
// notifications/tools/list_changed.
func (s *Server) SetTools(tools []tool.Tool) error {
	type entry struct {
		t    tool.Tool
		spec llm.ToolSpec
		mcp  *sdk.Tool
	}
	entries := make([]entry, 0, len(tools))
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		if t == nil {
			return fmt.Errorf("serving MCP: tool %d of %d is nil", i+1, len(tools))
		}
		spec := t.Spec()
		mt, err := mcpTool(spec)
		if err != nil {
			return err
		}
		if seen[spec.Name] {
			return fmt.Errorf("serving MCP: two tools are named %q; names must be unique", spec.Name)
		}
		seen[spec.Name] = true
		entries = append(entries, entry{t, spec, mt})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []string
	for _, n := range s.names {
		if !seen[n] {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
	s.names = s.names[:0]
	for _, e := range entries {
		s.srv.AddTool(e.mcp, s.handler(e.t, e.spec))
		s.names = append(s.names, e.spec.Name)
	}
	return nil
}

// ErrBadSpec is wrapped by the error for a tool that cannot be served.
var ErrBadSpec = errors.New("tool cannot be served over MCP")

// mcpTool maps a spec to an MCP tool, refusing what the go-sdk would panic
// on or what clients would reject.
func mcpTool(spec llm.ToolSpec) (*sdk.Tool, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("serving MCP: tool %q: %w: %s", spec.Name, ErrBadSpec, fmt.Sprintf(format, args...))
	}
	if !validToolName(spec.Name) {
		return nil, bad("names are 1 to 64 letters, digits, '_' or '-'")
	}
	schema := spec.Schema
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	var m map[string]any
	if err := json.Unmarshal(schema, &m); err != nil || m == nil {
		return nil, bad("the schema is not a JSON object")
	}
	if m["type"] != "object" {
		return nil, bad(`the schema's type is %v; MCP tools take an object ("type": "object")`, m["type"])
	}
	return &sdk.Tool{
		Name:        spec.Name,
		Description: spec.Description,
		InputSchema: json.RawMessage(schema),
		Annotations: Annotations(spec.Effect),
	}, nil
}

func validToolName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen {
		return false
	}
	return sanitize(s) == s
}

// Annotations returns the MCP annotations that say what effect does:
// read-only tools are read-only, idempotent and not destructive;
// idempotent tools are idempotent (and, as MCP assumes by default,
// possibly destructive); destructive tools are destructive and not
// idempotent.
func Annotations(effect llm.Effect) *sdk.ToolAnnotations {
	yes, no := true, false
	switch effect {
	case llm.EffectReadOnly:
		return &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &no}
	case llm.EffectIdempotent:
		return &sdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: &yes}
	default:
		return &sdk.ToolAnnotations{DestructiveHint: &yes}
	}
}

// handler runs t for one tools/call.
func (s *Server) handler(t tool.Tool, spec llm.ToolSpec) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		args := json.RawMessage(req.Params.Arguments)
		if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
			args = json.RawMessage("{}")
		}
		if s.opts.Approve != nil && tool.NeedsApproval(t, args) {
			if ok, reason := s.opts.Approve(ctx, spec, args); !ok {
				if reason == "" {
					reason = "the call was not approved"
				}
				return textResult(fmt.Sprintf("%s was not run: %s", spec.Name, reason), true), nil
			}
		}
		res, err := callSafely(ctx, t, args)
		if err != nil {
			return textResult(fmt.Sprintf("%s failed: %v", spec.Name, err), true), nil
		}
		return toMCPResult(res), nil
	}
}

func textResult(text string, isError bool) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, IsError: isError}
}

// toMCPResult maps a loom result to MCP content: its text as a text block
// (left out when empty and there are images), then each image as an image
// block (bytes) or a resource link (URL). An image that is neither becomes
// a text block saying it was left out.
func toMCPResult(res llm.ToolResult) *sdk.CallToolResult {
	if len(res.Images) == 0 {
		return textResult(res.Content, res.IsError)
	}
	out := &sdk.CallToolResult{IsError: res.IsError, Content: make([]sdk.Content, 0, 1+len(res.Images))}
	if res.Content != "" {
		out.Content = append(out.Content, &sdk.TextContent{Text: res.Content})
	}
	for i, img := range res.Images {
		switch {
		case img.Problem() != "":
			out.Content = append(out.Content, &sdk.TextContent{Text: fmt.Sprintf("[image %d left out: %s]", i+1, img.Problem())})
		case len(img.Data) > 0:
			out.Content = append(out.Content, &sdk.ImageContent{Data: img.Data, MIMEType: img.MediaType})
		default:
			out.Content = append(out.Content, &sdk.ResourceLink{URI: img.URL, Name: fmt.Sprintf("image %d", i+1), MIMEType: img.MediaType})
		}
	}
	return out
}

// callSafely runs t, turning a panic into an error.
func callSafely(ctx context.Context, t tool.Tool, args json.RawMessage) (res llm.ToolResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the tool panicked: %v", v)
		}
	}()
	return t.Call(ctx, args)
}

// ServeStdio serves one client over this process's stdin and stdout until
// the client disconnects (it returns nil) or ctx is done (it returns
// ctx's error). Nothing else may write to stdout meanwhile.
func (s *Server) ServeStdio(ctx context.Context) error {
	return s.ServeIO(ctx, os.Stdin, nopWriteCloser{os.Stdout})
}

// ServeIO serves one client reading newline-delimited JSON-RPC from r and
// writing to w, as [Server.ServeStdio] does. Both are closed at the end.
func (s *Server) ServeIO(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	err := s.srv.Run(ctx, &sdk.IOTransport{Reader: r, Writer: w})
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// HandlerOptions configure [Server.Handler]. The zero value is usable.
type HandlerOptions struct {
	// Stateless serves each request on its own, without an Mcp-Session-Id;
	// the server cannot then send notifications outside a request.
	Stateless bool
	// JSONResponse answers requests with application/json rather than
	// text/event-stream.
	JSONResponse bool
}

// Handler returns an http.Handler that serves the tools over streamable
// HTTP, for any path it is mounted at. Requests that reach it over
// loopback with a Host that is not loopback are refused (DNS rebinding
// protection); serve it on a loopback address unless the network in front
// of it authenticates clients.
func (s *Server) Handler(opts *HandlerOptions) http.Handler {
	var o HandlerOptions
	if opts != nil {
		o = *opts
	}
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, &sdk.StreamableHTTPOptions{
		Stateless:    o.Stateless,
		JSONResponse: o.JSONResponse,
		Logger:       s.opts.Logger,
	})
}

// Serve serves tools over stdin and stdout until the client disconnects or
// ctx is done: [NewServer] then [Server.ServeStdio].
func Serve(ctx context.Context, tools []tool.Tool, opts *ServeOptions) error {
	s, err := NewServer(tools, opts)
	if err != nil {
		return err
	}
	return s.ServeStdio(ctx)
}

// NewHandler returns an http.Handler serving tools over streamable HTTP:
// [NewServer] then [Server.Handler].
func NewHandler(tools []tool.Tool, opts *ServeOptions) (http.Handler, error) {
	s, err := NewServer(tools, opts)
	if err != nil {
		return nil, err
	}
	return s.Handler(nil), nil
}
