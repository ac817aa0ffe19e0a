package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomkit/loom/llm"
)

// remoteTool is one tool of an MCP server seen as a loom tool.
type remoteTool struct {
	client *Client
	remote string // the tool's name on the server
	spec   llm.ToolSpec
	schema *argSchema // nil: the schema could not be resolved
}

func newRemoteTool(c *Client, t *sdk.Tool, name string) *remoteTool {
	return &remoteTool{client: c, remote: t.Name, spec: specOf(name, t)}
}

// withName returns a copy of t advertised under name.
func (t *remoteTool) withName(name string) *remoteTool {
	u := *t
	u.spec.Name = name
	return &u
}

func (t *remoteTool) Spec() llm.ToolSpec { return t.spec }

// specOf maps an MCP tool to a loom spec: its input schema as the server
// sent it (an object schema accepting anything when it sent none), and
// the effect its annotations claim.
func specOf(name string, t *sdk.Tool) llm.ToolSpec {
	schema := json.RawMessage(`{"type":"object"}`)
	if t.InputSchema != nil {
		if b, err := json.Marshal(t.InputSchema); err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
			schema = b
		}
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	effect := effectOf(t.Annotations)
	return llm.ToolSpec{
		Name:          name,
		Description:   desc,
		Schema:        schema,
		Effect:        effect,
		NeedsApproval: effect != llm.EffectReadOnly,
	}
}

// effectOf reads the hints of MCP tool annotations. They are claims of the
// server, which loom takes at its word: readOnlyHint makes a tool
// read-only (and so free of approval), idempotentHint makes it idempotent,
// and anything else, including no annotations, is destructive.
func effectOf(a *sdk.ToolAnnotations) llm.Effect {
	switch {
	case a == nil:
		return llm.EffectDestructive
	case a.ReadOnlyHint:
		return llm.EffectReadOnly
	case a.IdempotentHint:
		return llm.EffectIdempotent
	}
	return llm.EffectDestructive
}

// Call validates args against the tool's input schema, then calls the
// tool on the server. Every failure is an error result: arguments the
// schema refuses (the server is not called), the server's own (isError),
// a protocol error, a server that went away during the call or cannot be
// reached again, a cancelled ctx (the server is sent
// notifications/cancelled). The Go error is always nil.
func (t *remoteTool) Call(ctx context.Context, args json.RawMessage) (llm.ToolResult, error) {
	c := t.client
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	var obj map[string]any
	if bytes.TrimSpace(args)[0] != '{' || json.Unmarshal(args, &obj) != nil {
		return errorResult("The arguments of %s are not one JSON object, so it was not called. Send the arguments as one JSON object.", t.spec.Name), nil
	}
	if msg := t.schema.check(obj); msg != "" {
		// Checked here so that the server never sees what its schema
		// refuses; a schema that could not be resolved checks nothing.
		return errorResult("%s", t.schema.invalid(t.spec.Name, msg)), nil
	}
	if err := ctx.Err(); err != nil {
		return errorResult("%s was not called: %v.", t.spec.Name, context.Cause(ctx)), nil
	}
	res, err := t.callOnce(ctx, args)
	if err != nil && ctx.Err() == nil && errors.Is(err, sdk.ErrSessionMissing) {
		// The HTTP server does not know the session (it restarted, or
		// expired it) and refused the request without running it, so it is
		// safe to send again on a new session.
		res, err = t.callOnce(ctx, args)
	}
	var gone *goneError
	switch {
	case err == nil:
		return toResult(res, c.opts.MaxResultBytes), nil
	case errors.Is(err, ErrClosed):
		return errorResult("%s was not called: the connection to MCP server %q is closed.", t.spec.Name, c.cfg.Name), nil
	case ctx.Err() != nil && errors.As(err, &gone):
		return errorResult("%s was not called: %v while connecting to MCP server %q.", t.spec.Name, context.Cause(ctx), c.cfg.Name), nil
	case errors.As(err, &gone):
		return errorResult("%s was not called: MCP server %q is gone and could not be started again: %v. Its tools cannot be used until the server is fixed.", t.spec.Name, c.cfg.Name, gone.err), nil
	case ctx.Err() != nil:
		return errorResult("The call of %s was cancelled (%v); MCP server %q was told to stop it, and it may have had an effect already.", t.spec.Name, context.Cause(ctx), c.cfg.Name), nil
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code != codeRejectedByTransport {
		// The server answered: the session is fine, the call is not.
		return errorResult("%s failed: %s", t.spec.Name, rpcErr.Message), nil
	}
	// The transport failed: the server died or cannot be reached. The
	// session was dropped; the next call starts a new one.
	return errorResult("The call of %s did not complete: MCP server %q went away during the call (%v). It may or may not have had an effect. The next call of one of its tools starts a new connection.", t.spec.Name, c.cfg.Name, err), nil
}

// codeRejectedByTransport is the JSON-RPC code the go-sdk gives a request
// its transport could not deliver (an HTTP server that cannot be reached).
const codeRejectedByTransport = -32005

// goneError reports that no session could be had.
type goneError struct{ err error }

func (e *goneError) Error() string { return e.err.Error() }
func (e *goneError) Unwrap() error { return e.err }

// callOnce calls the tool on the current session, connecting first if
// there is none. When the transport fails, the session is dropped and the
// error says why it ended.
func (t *remoteTool) callOnce(ctx context.Context, args json.RawMessage) (*sdk.CallToolResult, error) {
	c := t.client
	sess, proc, err := c.session(ctx)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		return nil, &goneError{err}
	}
	res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: t.remote, Arguments: args})
	if err == nil || ctx.Err() != nil {
		return res, err
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code != codeRejectedByTransport {
		return nil, err
	}
	c.dropSession(sess, proc, err)
	if proc != nil {
		// How the process ended says more than the broken pipe.
		return nil, fmt.Errorf("%w: %s", ErrServerGone, proc.describe(500*time.Millisecond))
	}
	return nil, err // the transport's own error (which may be ErrSessionMissing)
}

func errorResult(format string, args ...any) llm.ToolResult {
	return llm.ToolResult{Content: validUTF8(fmt.Sprintf(format, args...)), IsError: true}
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// toResult maps an MCP result to a loom result. Text blocks become the
// text; an image becomes one of the result's Images (see toImage) and a
// line like "[image 1: image/png, 1234 bytes]" in the text, so that
// consumers of text alone know it is there; content the model cannot be
// given is described instead: audio as a line, a resource link as its URI,
// an embedded resource as its text (or a line describing its blob).
// Structured content is added as JSON when no text block already carries
// it.
func toResult(res *sdk.CallToolResult, max int) llm.ToolResult {
	var parts []string
	var images []llm.Image
	hasText := false
	n := 0 // image blocks seen
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
			hasText = true
		case *sdk.ImageContent:
			n++
			img, line, ok := toImage(n, c)
			if ok {
				images = append(images, img)
			}
			parts = append(parts, line)
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes; audio from MCP tools is not passed to the model]", orUnknown(c.MIMEType), len(c.Data)))
		case *sdk.ResourceLink:
			s := fmt.Sprintf("[resource link: %s", c.URI)
			if c.Name != "" && c.Name != c.URI {
				s += " (" + c.Name + ")"
			}
			if c.MIMEType != "" {
				s += ", " + c.MIMEType
			}
			s += "]"
			if c.Description != "" {
				s += " " + c.Description
			}
			parts = append(parts, s)
		case *sdk.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
				parts = append(parts, "[empty embedded resource]")
			case r.Blob != nil:
				parts = append(parts, fmt.Sprintf("[resource %s: %s, %d bytes of binary data]", r.URI, orUnknown(r.MIMEType), len(r.Blob)))
			default:
				parts = append(parts, fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text))
			}
		default:
			if b, err := json.Marshal(c); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if res.StructuredContent != nil && !hasText {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := validUTF8(strings.Join(parts, "\n"))
	if text == "" && res.IsError {
		text = "The tool failed without saying why."
	}
	return llm.ToolResult{Content: truncate(text, max), IsError: res.IsError, Images: images}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// truncate keeps the head and tail of s when it is longer than max bytes.
func truncate(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	head, tail := max/2, len(s)-(max-max/2)
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return fmt.Sprintf("%s\n[... %d bytes cut from the middle of the result ...]\n%s", s[:head], tail-head, s[tail:])
}
