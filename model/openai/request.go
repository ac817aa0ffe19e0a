package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/internal/wire"
)

// The request body of POST /chat/completions. Field order is the order of
// the encoded JSON, which the golden files pin.
type chatRequest struct {
	Model               string          `json:"model,omitempty"`
	Messages            []chatMessage   `json:"messages"`
	Tools               []chatTool      `json:"tools,omitempty"`
	ToolChoice          any             `json:"tool_choice,omitempty"` // "none" | "required" | namedChoice
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	Stop                []string        `json:"stop,omitempty"`
	ResponseFormat      *responseFormat `json:"response_format,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *streamOptions  `json:"stream_options,omitempty"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, a []contentPart, or nil (null: an assistant
	// message holding only tool calls).
	Content    any            `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type contentPart struct {
	Type     string    `json:"type"` // "text" | "image_url"
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function functionSpec `json:"function"`
}

type functionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type namedChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type responseFormat struct {
	Type       string     `json:"type"`
	JSONSchema jsonSchema `json:"json_schema"`
}

type jsonSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// emptySchema is sent for a tool that declares no arguments.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// badRequest is the error for a request refused before sending.
func badRequest(op, msg string, cause error) error {
	return &model.Error{Kind: model.KindBadRequest, Op: op, Message: msg, Err: cause}
}

// encodeRequest checks req and encodes it as one JSON body, in one pass.
func (m *Model) encodeRequest(op string, req llm.Request, stream bool) ([]byte, error) {
	if m.extraErr == nil && len(m.extra) == 0 && direct(req) {
		// The common shapes go straight from req to JSON; the checks are
		// buildBody's, in its order (its message mapping cannot fail for
		// them).
		if err := checkHistory(op, req); err != nil {
			return nil, err
		}
		name, err := m.modelName(op, req)
		if err != nil {
			return nil, err
		}
		if err := checkToolChoice(op, req); err != nil {
			return nil, err
		}
		if out, ok := m.appendDirect(make([]byte, 0, m.sizeHint(req)), req, stream, name); ok {
			return out, nil
		}
	}
	body, err := m.buildBody(op, req, stream)
	if err != nil {
		return nil, err
	}
	out, err := appendRequest(make([]byte, 0, m.sizeHint(req)), &body)
	if err != nil {
		// What the fast encoder does not handle, encoding/json does (or
		// refuses with its own error).
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&body); err != nil {
			return nil, badRequest(op, "the request cannot be encoded as JSON", err)
		}
		out = bytes.TrimRight(buf.Bytes(), "\n")
	}
	if len(m.extraJSON) > 0 {
		// Splice the pre-encoded extra fields in before the closing brace.
		out = append(out[:len(out)-1], ',')
		out = append(out, m.extraJSON...)
		out = append(out, '}')
	}
	return out, nil
}

// buildBody checks req and maps it to the request body.
func (m *Model) buildBody(op string, req llm.Request, stream bool) (chatRequest, error) {
	if m.extraErr != nil {
		return chatRequest{}, badRequest(op, "Config.ExtraBody cannot be encoded as JSON", m.extraErr)
	}
	if err := checkHistory(op, req); err != nil {
		return chatRequest{}, err
	}
	if err := llm.CheckImages(req.Messages); err != nil {
		return chatRequest{}, badRequest(op, "the history holds an image that cannot be sent; nothing was sent", err)
	}
	if n := m.cfg.MaxImages; n > 0 {
		req.Messages, _ = wire.FitImages(req.Messages, wire.ImageLimits{MaxImages: n, ManyImages: n, MaxBase64: math.MaxInt})
	}
	name, err := m.modelName(op, req)
	if err != nil {
		return chatRequest{}, err
	}
	body := chatRequest{
		Model:       name,
		Temperature: req.Temperature,
		TopP:        req.TopP,
		Stop:        req.Stop,
	}
	maxTokens := m.maxTokens(req)
	if m.cfg.LegacyMaxTokens {
		body.MaxTokens = maxTokens
	} else {
		body.MaxCompletionTokens = maxTokens
	}

	msgs, err := messages(req)
	if err != nil {
		return chatRequest{}, badRequest(op, err.Error(), err)
	}
	body.Messages = msgs

	if len(req.Tools) > 0 {
		body.Tools = make([]chatTool, len(req.Tools))
		for i, t := range req.Tools {
			body.Tools[i] = chatTool{Type: "function", Function: functionSpec{Name: t.Name, Description: t.Description, Parameters: toolParams(t)}}
		}
	}
	if err := checkToolChoice(op, req); err != nil {
		return chatRequest{}, err
	}
	switch req.ToolChoice.Mode {
	case llm.ToolRequired:
		body.ToolChoice = "required"
	case llm.ToolNone:
		if len(req.Tools) > 0 {
			body.ToolChoice = "none"
		}
	case llm.ToolSpecific:
		if len(req.ToolChoice.Names) == 1 {
			var c namedChoice
			c.Type = "function"
			c.Function.Name = req.ToolChoice.Names[0]
			body.ToolChoice = c
		} else {
			// Chat Completions can force one named function or any of
			// them, not a subset: several names become "required".
			body.ToolChoice = "required"
		}
	}
	if req.Schema != nil {
		body.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: jsonSchema{Name: req.Schema.Name, Schema: req.Schema.Schema}}
	}
	if stream {
		body.Stream = true
		body.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	m.dropOverridden(&body)
	return body, nil
}

func checkHistory(op string, req llm.Request) error {
	if err := llm.CheckHistory(req.Messages); err != nil {
		return badRequest(op, "the history would be rejected by the API; nothing was sent", err)
	}
	return nil
}

// modelName is the model to ask for: the request's, else the Config's.
func (m *Model) modelName(op string, req llm.Request) (string, error) {
	name := req.Model
	if name == "" {
		name = m.cfg.Model
	}
	if name == "" && !m.extra["model"] {
		return "", badRequest(op, "no model named: set llm.Request.Model or openai.Config.Model", nil)
	}
	return name, nil
}

func (m *Model) maxTokens(req llm.Request) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return m.cfg.MaxTokens
}

func checkToolChoice(op string, req llm.Request) error {
	if _, err := req.ToolChoice.Allowed(req.Tools); err != nil {
		return badRequest(op, "tool choice: "+err.Error(), err)
	}
	return nil
}

// toolParams is the JSON Schema sent for a tool's arguments.
func toolParams(t llm.ToolSpec) json.RawMessage {
	if len(bytes.TrimSpace(t.Schema)) == 0 {
		return emptySchema
	}
	return t.Schema
}

// sizeHint guesses the encoded size so the buffer grows once or not at all.
func (m *Model) sizeHint(req llm.Request) int {
	n := 256 + len(req.System) + len(m.extraJSON)
	for _, msg := range req.Messages {
		for _, p := range msg.Parts {
			switch p := p.(type) {
			case llm.Text:
				n += len(p.Text) + 16
			case llm.ToolCall:
				n += len(p.Arguments) + len(p.ID) + len(p.Name) + 64
			case llm.ToolResult:
				n += len(p.Content) + len(p.CallID) + 48
				for _, img := range p.Images {
					n += len(p.CallID) + len(p.Name) + len(img.URL) + base64.StdEncoding.EncodedLen(len(img.Data)) + 112
				}
			case llm.Image:
				n += len(p.URL) + base64.StdEncoding.EncodedLen(len(p.Data)) + 64
			}
		}
		n += 32
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Schema) + 64
	}
	return n + n/8 // escaping
}

// dropOverridden clears the fields that Config.ExtraBody sets itself, so
// that the extra value is the only one in the body.
func (m *Model) dropOverridden(b *chatRequest) {
	for k := range m.extra {
		switch k {
		case "model":
			b.Model = ""
		case "tools":
			b.Tools = nil
		case "tool_choice":
			b.ToolChoice = nil
		case "temperature":
			b.Temperature = nil
		case "top_p":
			b.TopP = nil
		case "max_completion_tokens":
			b.MaxCompletionTokens = 0
		case "max_tokens":
			b.MaxTokens = 0
		case "stop":
			b.Stop = nil
		case "response_format":
			b.ResponseFormat = nil
		case "stream_options":
			b.StreamOptions = nil
		}
	}
}

// errUnsupported marks parts the format cannot carry where they are.
var errUnsupported = errors.New("openai: unsupported part")

// messages maps the system prompt and the history to Chat Completions
// messages. A user message's tool results become consecutive "tool"
// messages, in order, right after the assistant message that made the
// calls; the rest of that user message (text, images) follows them as one
// user message, which starts with the images of the results (tool
// messages take text only), each result's after a text naming its call.
func messages(req llm.Request) ([]chatMessage, error) {
	out := make([]chatMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		out = append(out, chatMessage{Role: "system", Content: req.System})
	}
	for i, msg := range req.Messages {
		switch msg.Role {
		case llm.RoleAssistant:
			out = append(out, assistantMessage(msg))
		case llm.RoleUser:
			if len(msg.Parts) == 1 {
				if t, ok := msg.Parts[0].(llm.Text); ok {
					// The common case, without copying the text.
					out = append(out, chatMessage{Role: "user", Content: t.Text})
					continue
				}
			}
			var rest []llm.Part
			var images []llm.ToolResult // results with images
			for _, p := range msg.Parts {
				if r, ok := p.(llm.ToolResult); ok {
					content := r.Content
					if r.IsError {
						// The format has no error flag: say it in words.
						content = "Error: " + content
					}
					out = append(out, chatMessage{Role: "tool", ToolCallID: r.CallID, Content: content})
					if len(r.Images) > 0 {
						images = append(images, r)
					}
					continue
				}
				rest = append(rest, p)
			}
			if len(rest) > 0 || len(images) > 0 || !hasResults(msg) {
				um, err := userMessage(images, rest)
				if err != nil {
					return nil, fmt.Errorf("message %d: %w", i, err)
				}
				out = append(out, um)
			}
		}
	}
	return out, nil
}

func hasResults(msg llm.Message) bool {
	for _, p := range msg.Parts {
		if _, ok := p.(llm.ToolResult); ok {
			return true
		}
	}
	return false
}

// userMessage holds text as a plain string, or content parts when there
// are images: first those of the results (each result's after a text part
// naming its call), then the parts in order, empty texts left out.
func userMessage(results []llm.ToolResult, parts []llm.Part) (chatMessage, error) {
	images := len(results) > 0
	for _, p := range parts {
		if _, ok := p.(llm.Image); ok {
			images = true
		}
	}
	if !images {
		return chatMessage{Role: "user", Content: llm.Message{Parts: parts}.Text()}, nil
	}
	n := len(parts)
	for _, r := range results {
		n += 1 + len(r.Images)
	}
	cps := make([]contentPart, 0, n)
	for _, r := range results {
		cps = append(cps, contentPart{Type: "text", Text: wire.ImagesCaption(r.CallID, r.Name)})
		for k, img := range r.Images {
			cp, err := imagePart(img)
			if err != nil {
				return chatMessage{}, fmt.Errorf("the result for %q, image %d: %w", r.CallID, k, err)
			}
			cps = append(cps, cp)
		}
	}
	for _, p := range parts {
		switch p := p.(type) {
		case llm.Text:
			if p.Text != "" {
				cps = append(cps, contentPart{Type: "text", Text: p.Text})
			}
		case llm.Image:
			cp, err := imagePart(p)
			if err != nil {
				return chatMessage{}, err
			}
			cps = append(cps, cp)
		}
	}
	return chatMessage{Role: "user", Content: cps}, nil
}

// imagePart is an image_url part: the image's URL, or its bytes as a
// data: URL.
func imagePart(img llm.Image) (contentPart, error) {
	url := img.URL
	if url == "" {
		if img.MediaType == "" || len(img.Data) == 0 {
			return contentPart{}, fmt.Errorf("%w: an image needs a URL, or data and a media type", errUnsupported)
		}
		url = "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
	}
	return contentPart{Type: "image_url", ImageURL: &imageURL{URL: url}}, nil
}

// assistantMessage carries the text and the tool calls. Thinking is not
// sent back: Chat Completions has no field for it, and DeepSeek rejects
// reasoning_content in input messages. Images in assistant turns are
// dropped for the same reason.
func assistantMessage(msg llm.Message) chatMessage {
	cm := chatMessage{Role: "assistant"}
	var text string
	texts := 0
	for _, p := range msg.Parts {
		switch p := p.(type) {
		case llm.Text:
			// Usually one part: no copy. Several are joined as
			// llm.Message.Text joins them.
			text += p.Text
			texts++
		case llm.ToolCall:
			args := p.Arguments
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			cm.ToolCalls = append(cm.ToolCalls, chatToolCall{ID: p.ID, Type: "function", Function: functionCall{Name: p.Name, Arguments: args}})
		}
	}
	if texts > 0 || len(cm.ToolCalls) == 0 {
		cm.Content = text
	}
	return cm
}
