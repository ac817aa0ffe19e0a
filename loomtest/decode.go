package loomtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/loomkit/loom/llm"
)

// The checks below are the vendors' documented 400s, worded like theirs,
// so an adapter that would be refused by the vendor is refused here.

var (
	anthropicIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	toolNamePattern    = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// --- Anthropic Messages requests ---

type antRequest struct {
	Model         *string         `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []antInMessage  `json:"messages"`
	Tools         []antTool       `json:"tools"`
	ToolChoice    *antToolChoice  `json:"tool_choice"`
	Stream        bool            `json:"stream"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	StopSequences []string        `json:"stop_sequences"`
	OutputConfig  *struct {
		Format *antOutputFormat `json:"format"`
	} `json:"output_config"`
}

// antOutputFormat is output_config.format: structured output, a JSON
// Schema the answer's text must match.
type antOutputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

type antInMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type antInBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	Thinking  *string         `json:"thinking"`
	Signature *string         `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

type antTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type antToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

func decodeAnthropic(body []byte, rec *Request, check bool) error {
	var req antRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("the body is not a valid Messages request: %v", err)
	}
	rec.Stream = req.Stream
	d := &rec.Decoded
	if req.Model != nil {
		d.Model = *req.Model
	}
	if req.MaxTokens != nil {
		d.MaxTokens = *req.MaxTokens
	}
	d.Temperature, d.TopP, d.Stop = req.Temperature, req.TopP, req.StopSequences
	if check {
		switch {
		case req.Model == nil || *req.Model == "":
			return errors.New("model: Field required")
		case req.MaxTokens == nil:
			return errors.New("max_tokens: Field required")
		case *req.MaxTokens < 1:
			return errors.New("max_tokens: Input should be greater than or equal to 1")
		case len(req.Messages) == 0:
			return errors.New("messages: Field required (at least one message)")
		case req.Temperature != nil && (*req.Temperature < 0 || *req.Temperature > 1):
			return errors.New("temperature: Input should be between 0 and 1")
		}
	}
	sys, err := anthropicSystem(req.System)
	if err != nil {
		return err
	}
	d.System = sys
	if oc := req.OutputConfig; oc != nil && oc.Format != nil {
		shape, err := anthropicOutputFormat(oc.Format, check)
		if err != nil {
			return err
		}
		d.Schema = shape
	}

	names := map[string]bool{}
	for i, t := range req.Tools {
		d.Tools = append(d.Tools, llm.ToolSpec{Name: t.Name, Description: t.Description, Schema: t.InputSchema})
		names[t.Name] = true
		if !check || (t.Type != "" && t.Type != "custom") {
			continue
		}
		if !toolNamePattern.MatchString(t.Name) {
			return fmt.Errorf("tools.%d.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i)
		}
		if len(t.InputSchema) == 0 {
			return fmt.Errorf("tools.%d.custom.input_schema: Field required", i)
		}
		var schema struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(t.InputSchema, &schema) != nil || schema.Type != "object" {
			return fmt.Errorf("tools.%d.custom.input_schema.type: Input should be 'object'", i)
		}
	}
	if tc := req.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto":
		case "any":
			d.ToolChoice.Mode = llm.ToolRequired
		case "none":
			d.ToolChoice.Mode = llm.ToolNone
		case "tool":
			d.ToolChoice = llm.ChooseTools(tc.Name)
			if check && !names[tc.Name] {
				return fmt.Errorf("tool_choice.tool.name: tool %q is not one of the tools", tc.Name)
			}
		default:
			if check {
				return fmt.Errorf("tool_choice.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", tc.Type)
			}
		}
	}

	var prevUses []string // tool_use ids of the previous message
	for n, m := range req.Messages {
		if check && m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", n)
		}
		msg, uses, err := anthropicMessage(n, m, check)
		if err != nil {
			return err
		}
		d.Messages = append(d.Messages, msg)
		if !check {
			continue
		}
		results := map[string]bool{}
		for j, p := range msg.Parts {
			r, ok := p.(llm.ToolResult)
			if !ok {
				continue
			}
			if !slices.Contains(prevUses, r.CallID) {
				return fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", n, j, r.CallID)
			}
			results[r.CallID] = true
		}
		if missing := missingIDs(prevUses, results); len(missing) > 0 {
			return fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", n-1, strings.Join(missing, ", "))
		}
		prevUses = uses
	}
	if check && len(prevUses) > 0 {
		return fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", len(req.Messages)-1, strings.Join(prevUses, ", "))
	}
	return nil
}

// anthropicOutputFormat decodes output_config.format. Anthropic names no
// schema, so the shape's Name is empty. When checking, a type other than
// json_schema, and a schema that is missing or not an object, are refused.
func anthropicOutputFormat(f *antOutputFormat, check bool) (*llm.OutputShape, error) {
	if check {
		if f.Type != "json_schema" {
			return nil, fmt.Errorf("output_config.format.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'json_schema'", f.Type)
		}
		switch s := bytes.TrimSpace(f.Schema); {
		case len(s) == 0 || string(s) == "null":
			return nil, errors.New("output_config.format.json_schema.schema: Field required")
		case s[0] != '{':
			return nil, errors.New("output_config.format.json_schema.schema: Input should be a valid dictionary")
		}
	}
	return &llm.OutputShape{Schema: f.Schema}, nil
}

func missingIDs(uses []string, got map[string]bool) []string {
	var missing []string
	for _, id := range uses {
		if !got[id] {
			missing = append(missing, id)
		}
	}
	return missing
}

func anthropicSystem(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var blocks []antInBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", fmt.Errorf("system: Input should be a valid string or a list of text blocks: %v", err)
	}
	var b strings.Builder
	for i, bl := range blocks {
		if bl.Type != "text" || bl.Text == nil {
			return "", fmt.Errorf("system.%d.type: system blocks must be text blocks", i)
		}
		b.WriteString(*bl.Text)
	}
	return b.String(), nil
}

// anthropicMessage decodes one message and returns its tool_use ids.
func anthropicMessage(n int, m antInMessage, check bool) (llm.Message, []string, error) {
	msg := llm.Message{Role: llm.Role(m.Role)}
	raw := bytes.TrimSpace(m.Content)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return msg, nil, fmt.Errorf("messages.%d.content: %v", n, err)
		}
		if check && s == "" {
			return msg, nil, fmt.Errorf("messages.%d: all messages must have non-empty content except for the optional final assistant message", n)
		}
		msg.Parts = []llm.Part{llm.Text{Text: s}}
		return msg, nil, nil
	}
	var blocks []antInBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return msg, nil, fmt.Errorf("messages.%d.content: Input should be a valid string or list of content blocks: %v", n, err)
	}
	if check && len(blocks) == 0 {
		return msg, nil, fmt.Errorf("messages.%d: all messages must have non-empty content except for the optional final assistant message", n)
	}
	var uses []string
	sawOther := false
	for j, b := range blocks {
		where := fmt.Sprintf("messages.%d.content.%d", n, j)
		switch b.Type {
		case "text":
			if b.Text == nil {
				return msg, nil, fmt.Errorf("%s.text.text: Field required", where)
			}
			if check && *b.Text == "" {
				return msg, nil, fmt.Errorf("%s: text content blocks must be non-empty", where)
			}
			msg.Parts = append(msg.Parts, llm.Text{Text: *b.Text})
			sawOther = true
		case "thinking":
			if check && b.Signature == nil {
				return msg, nil, fmt.Errorf("%s.thinking.signature: Field required", where)
			}
			var th llm.Thinking
			if b.Thinking != nil {
				th.Text = *b.Thinking
			}
			if b.Signature != nil {
				th.Signature = *b.Signature
			}
			msg.Parts = append(msg.Parts, th)
			sawOther = true
		case "redacted_thinking":
			msg.Parts = append(msg.Parts, llm.Thinking{Redacted: b.Data})
			sawOther = true
		case "tool_use":
			if check {
				if m.Role != "assistant" {
					return msg, nil, fmt.Errorf("%s: tool_use blocks are only allowed in assistant messages", where)
				}
				if !anthropicIDPattern.MatchString(b.ID) {
					return msg, nil, fmt.Errorf("%s.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'", where)
				}
				if slices.Contains(uses, b.ID) {
					return msg, nil, fmt.Errorf("%s: `tool_use` ids must be unique", where)
				}
				if in := bytes.TrimSpace(b.Input); len(in) == 0 || in[0] != '{' {
					return msg, nil, fmt.Errorf("%s.tool_use.input: Input should be a valid dictionary", where)
				}
			}
			uses = append(uses, b.ID)
			msg.Parts = append(msg.Parts, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: string(b.Input)})
			sawOther = true
		case "tool_result":
			if check {
				if m.Role != "user" {
					return msg, nil, fmt.Errorf("%s: tool_result blocks are only allowed in user messages", where)
				}
				if sawOther {
					return msg, nil, fmt.Errorf("%s: tool_result blocks must come first in the content of a user message; text must come after all tool results", where)
				}
			}
			r, err := toolResult(where, b, check)
			if err != nil {
				return msg, nil, err
			}
			msg.Parts = append(msg.Parts, r)
		case "image":
			img, err := anthropicImage(where, b, check)
			if err != nil {
				return msg, nil, err
			}
			msg.Parts = append(msg.Parts, img)
			sawOther = true
		default:
			if check {
				return msg, nil, fmt.Errorf("%s.type: unknown content block type %q", where, b.Type)
			}
		}
	}
	return msg, uses, nil
}

// toolResult decodes a tool_result block: its content is a string, or
// an array of text, image, document and search_result blocks (the text
// joined, the images kept). A result marked is_error may hold only text.
func toolResult(where string, b antInBlock, check bool) (llm.ToolResult, error) {
	r := llm.ToolResult{CallID: b.ToolUseID, IsError: b.IsError}
	raw := bytes.TrimSpace(b.Content)
	if len(raw) == 0 || string(raw) == "null" {
		return r, nil
	}
	if raw[0] == '"' {
		err := json.Unmarshal(raw, &r.Content)
		if err != nil {
			err = fmt.Errorf("%s.tool_result.content: %v", where, err)
		}
		return r, err
	}
	var blocks []antInBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return r, fmt.Errorf("%s.tool_result.content: Input should be a valid string or list of content blocks: %v", where, err)
	}
	var text strings.Builder
	for k, bl := range blocks {
		at := fmt.Sprintf("%s.tool_result.content.%d", where, k)
		switch bl.Type {
		case "text":
			if bl.Text == nil {
				return r, fmt.Errorf("%s.text.text: Field required", at)
			}
			if check && *bl.Text == "" {
				return r, fmt.Errorf("%s: text content blocks must be non-empty", at)
			}
			text.WriteString(*bl.Text)
		case "image":
			if check && b.IsError {
				return r, fmt.Errorf("%s.tool_result: all content must be type 'text' if 'is_error' is true", where)
			}
			img, err := anthropicImage(at, bl, check)
			if err != nil {
				return r, err
			}
			r.Images = append(r.Images, img)
		case "document", "search_result":
			if check && b.IsError {
				return r, fmt.Errorf("%s.tool_result: all content must be type 'text' if 'is_error' is true", where)
			}
		default:
			if check {
				return r, fmt.Errorf("%s.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'text', 'image', 'search_result', 'document'", at, bl.Type)
			}
		}
	}
	r.Content = text.String()
	return r, nil
}

// Anthropic's limits on an image block.
const (
	maxAnthropicImageBase64 = 5 << 20 // bytes of base64, not of the image
)

var anthropicImageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// anthropicImage decodes an image block, refusing (when checking) what the
// API refuses: no source, a media type it does not take, empty or
// invalid base64 data, more than 5 MB of base64, a url source without url.
func anthropicImage(where string, b antInBlock, check bool) (llm.Image, error) {
	var img llm.Image
	src := b.Source
	if src == nil {
		if check {
			return img, fmt.Errorf("%s.image.source: Field required", where)
		}
		return img, nil
	}
	img.MediaType, img.URL = src.MediaType, src.URL
	switch {
	case !check:
	case src.Type == "base64":
		if !slices.Contains(anthropicImageTypes, src.MediaType) {
			return img, fmt.Errorf("%s.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", where)
		}
		if src.Data == "" {
			return img, fmt.Errorf("%s.image.source.base64: image cannot be empty", where)
		}
		if len(src.Data) > maxAnthropicImageBase64 {
			return img, fmt.Errorf("%s.image.source.base64: image exceeds 5 MB maximum: %d bytes > %d bytes", where, len(src.Data), maxAnthropicImageBase64)
		}
	case src.Type == "url":
		if src.URL == "" {
			return img, fmt.Errorf("%s.image.source.url.url: Field required", where)
		}
	default:
		return img, fmt.Errorf("%s.image.source: Input tag '%s' found using 'type' does not match any of the expected tags: 'base64', 'url', 'file'", where, src.Type)
	}
	if src.Data != "" {
		data, err := base64.StdEncoding.DecodeString(src.Data)
		if err != nil {
			return img, fmt.Errorf("%s.image.source.base64.data: invalid base64: %v", where, err)
		}
		img.Data = data
	}
	return img, nil
}

// --- OpenAI Chat Completions requests ---

type oaiRequest struct {
	Model         *string         `json:"model"`
	Messages      []oaiInMessage  `json:"messages"`
	Tools         []oaiTool       `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	Stop                json.RawMessage    `json:"stop"`
	ResponseFormat      *oaiResponseFormat `json:"response_format"`
}

// oaiResponseFormat is response_format: text, json_object, or json_schema
// with a named JSON Schema the answer must match.
type oaiResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   *string         `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

type oaiInMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

type oaiTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

func decodeOpenAI(body []byte, rec *Request, check bool) error {
	var req oaiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("We could not parse the JSON body of your request: %v", err)
	}
	rec.Stream = req.Stream
	rec.IncludeUsage = req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	d := &rec.Decoded
	if req.Model != nil {
		d.Model = *req.Model
	}
	switch {
	case req.MaxCompletionTokens != nil:
		d.MaxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		d.MaxTokens = *req.MaxTokens
	}
	d.Temperature, d.TopP = req.Temperature, req.TopP
	if s := bytes.TrimSpace(req.Stop); len(s) > 0 && s[0] == '"' {
		var one string
		json.Unmarshal(s, &one)
		d.Stop = []string{one}
	} else if len(s) > 0 {
		json.Unmarshal(s, &d.Stop)
	}
	if check {
		switch {
		case req.Model == nil || *req.Model == "":
			return errors.New("you must provide a model parameter")
		case len(req.Messages) == 0:
			return errors.New("[] is too short - 'messages'")
		case req.StreamOptions != nil && !req.Stream:
			return errors.New("The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
	}
	if f := req.ResponseFormat; f != nil {
		shape, err := openAIResponseFormat(f, check)
		if err != nil {
			return err
		}
		d.Schema = shape
	}
	names := map[string]bool{}
	for i, t := range req.Tools {
		if check && t.Type != "function" {
			return fmt.Errorf("Invalid value for 'tools[%d].type': expected 'function'.", i)
		}
		if check && !toolNamePattern.MatchString(t.Function.Name) {
			return fmt.Errorf("Invalid 'tools[%d].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i)
		}
		names[t.Function.Name] = true
		d.Tools = append(d.Tools, llm.ToolSpec{Name: t.Function.Name, Description: t.Function.Description, Schema: t.Function.Parameters})
	}
	if tc := bytes.TrimSpace(req.ToolChoice); len(tc) > 0 {
		var mode string
		if json.Unmarshal(tc, &mode) == nil {
			switch mode {
			case "auto":
			case "none":
				d.ToolChoice.Mode = llm.ToolNone
			case "required":
				d.ToolChoice.Mode = llm.ToolRequired
			default:
				if check {
					return fmt.Errorf("Invalid value for 'tool_choice': %q", mode)
				}
			}
		} else {
			var named struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if err := json.Unmarshal(tc, &named); err != nil && check {
				return fmt.Errorf("Invalid value for 'tool_choice': %v", err)
			}
			d.ToolChoice = llm.ChooseTools(named.Function.Name)
			if check && !names[named.Function.Name] {
				return fmt.Errorf("Invalid value for 'tool_choice': function %q is not one of the tools", named.Function.Name)
			}
		}
	}

	var system []string
	var pending []string // call ids awaiting tool messages
	var answered map[string]bool
	flush := func() error {
		if missing := missingIDs(pending, answered); check && len(missing) > 0 {
			return fmt.Errorf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(missing, ", "))
		}
		pending, answered = nil, nil
		return nil
	}
	inResults := false
	for n, m := range req.Messages {
		if m.Role != "tool" {
			if err := flush(); err != nil {
				return err
			}
			inResults = false
		}
		if check && m.Role != "user" && hasImageURL(m.Content) {
			return fmt.Errorf("Invalid 'messages[%d]'. Image URLs are only allowed for messages with role 'user', but this message with role '%s' contains an image URL.", n, m.Role)
		}
		switch m.Role {
		case "system", "developer":
			s, err := openAIText(m.Content)
			if err != nil {
				return fmt.Errorf("Invalid 'messages[%d].content': %v", n, err)
			}
			system = append(system, s)
		case "user":
			msg, err := openAIUser(n, m.Content, check)
			if err != nil {
				return err
			}
			d.Messages = append(d.Messages, msg)
		case "assistant":
			msg := llm.Message{Role: llm.RoleAssistant}
			if m.ReasoningContent != nil && *m.ReasoningContent != "" {
				msg.Parts = append(msg.Parts, llm.Thinking{Text: *m.ReasoningContent})
			}
			if c := bytes.TrimSpace(m.Content); len(c) > 0 && string(c) != "null" {
				s, err := openAIText(c)
				if err != nil {
					return fmt.Errorf("Invalid 'messages[%d].content': %v", n, err)
				}
				if s != "" {
					msg.Parts = append(msg.Parts, llm.Text{Text: s})
				}
			} else if check && len(m.ToolCalls) == 0 {
				return fmt.Errorf("Invalid value for 'messages[%d].content': expected a string, got null.", n)
			}
			for _, c := range m.ToolCalls {
				msg.Parts = append(msg.Parts, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
				pending = append(pending, c.ID)
			}
			answered = map[string]bool{}
			d.Messages = append(d.Messages, msg)
		case "tool":
			if check && !slices.Contains(pending, m.ToolCallID) {
				return errors.New("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			if answered != nil {
				answered[m.ToolCallID] = true
			}
			content, err := openAIText(m.Content)
			if err != nil {
				return fmt.Errorf("Invalid 'messages[%d].content': %v", n, err)
			}
			r := llm.ToolResult{CallID: m.ToolCallID, Content: content}
			if inResults {
				last := &d.Messages[len(d.Messages)-1]
				last.Parts = append(last.Parts, r)
			} else {
				d.Messages = append(d.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{r}})
				inResults = true
			}
		default:
			if check {
				return fmt.Errorf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'.", m.Role)
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	d.System = strings.Join(system, "\n\n")
	return nil
}

// schemaNamePattern is the pattern of response_format.json_schema.name.
var schemaNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// openAIResponseFormat decodes response_format: a json_schema format
// becomes the shape (nil for text and json_object). When checking, an
// unknown type, a json_schema format without json_schema or its name, a
// name off the pattern, and a schema that is not an object are refused.
// The schema itself may be left out: the API documents it as optional.
func openAIResponseFormat(f *oaiResponseFormat, check bool) (*llm.OutputShape, error) {
	switch f.Type {
	case "text", "json_object":
		return nil, nil
	case "json_schema":
	default:
		if check {
			return nil, fmt.Errorf("Invalid value: '%s'. Supported values are: 'text', 'json_object', and 'json_schema'.", f.Type)
		}
		return nil, nil
	}
	js := f.JSONSchema
	if js == nil {
		if check {
			return nil, errors.New("Missing required parameter: 'response_format.json_schema'.")
		}
		return nil, nil
	}
	if check {
		switch s := bytes.TrimSpace(js.Schema); {
		case js.Name == nil:
			return nil, errors.New("Missing required parameter: 'response_format.json_schema.name'.")
		case !schemaNamePattern.MatchString(*js.Name):
			return nil, errors.New("Invalid 'response_format.json_schema.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.")
		case len(s) > 0 && string(s) != "null" && s[0] != '{':
			return nil, fmt.Errorf("Invalid type for 'response_format.json_schema.schema': expected an object, but got %s instead.", jsonKind(s))
		}
	}
	shape := &llm.OutputShape{Schema: js.Schema}
	if js.Name != nil {
		shape.Name = *js.Name
	}
	return shape, nil
}

// jsonKind names the kind of the JSON value s, as OpenAI's errors do.
func jsonKind(s []byte) string {
	switch s[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// openAIText reads content that is a string or an array of text parts.
func openAIText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("expected a string or an array of content parts: %v", err)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

type oaiPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// hasImageURL reports whether content is an array holding an image_url
// part, which only user messages may hold.
func hasImageURL(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return false
	}
	var parts []oaiPart
	if json.Unmarshal(raw, &parts) != nil {
		return false
	}
	for _, p := range parts {
		if p.Type == "image_url" {
			return true
		}
	}
	return false
}

// openAIImageTypes are the formats the API takes in a data: URL.
var openAIImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// openAIUser decodes a user message. An image_url part keeps its URL; when
// checking, a part without image_url or url, and a data: URL that is not
// base64 of a format the API takes, are refused.
func openAIUser(n int, raw json.RawMessage, check bool) (llm.Message, error) {
	msg := llm.Message{Role: llm.RoleUser}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		msg.Parts = []llm.Part{llm.Text{Text: s}}
		if err != nil {
			err = fmt.Errorf("Invalid 'messages[%d].content': %v", n, err)
		}
		return msg, err
	}
	var parts []oaiPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return msg, fmt.Errorf("Invalid 'messages[%d].content': expected a string or an array of content parts: %v", n, err)
	}
	for k, p := range parts {
		switch p.Type {
		case "text":
			msg.Parts = append(msg.Parts, llm.Text{Text: p.Text})
		case "image_url":
			var url string
			if p.ImageURL != nil {
				url = p.ImageURL.URL
			}
			if check {
				if err := checkImageURL(fmt.Sprintf("messages[%d].content[%d].image_url.url", n, k), url); err != nil {
					return msg, err
				}
			}
			msg.Parts = append(msg.Parts, llm.Image{URL: url})
		default:
			if check {
				return msg, fmt.Errorf("Invalid value: '%s'. Supported values are: 'text', 'image_url', 'input_audio', 'refusal', and 'file'.", p.Type)
			}
		}
	}
	return msg, nil
}

func checkImageURL(param, url string) error {
	if url == "" {
		return fmt.Errorf("Missing required parameter: '%s'.", param)
	}
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return nil // an http(s) URL: the API fetches it
	}
	mediaType, data, ok := strings.Cut(rest, ";base64,")
	if !ok {
		return fmt.Errorf("Invalid '%s'. Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got a value of length %d.", param, len(url))
	}
	if !slices.Contains(openAIImageTypes, mediaType) {
		return fmt.Errorf("Invalid '%s'. Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got unsupported MIME type '%s'.", param, mediaType)
	}
	if _, err := base64.StdEncoding.DecodeString(data); err != nil || data == "" {
		return errors.New("You uploaded an unsupported image. Please make sure your image is valid.")
	}
	return nil
}

// peekStream reads the top-level "stream" flag and OpenAI's
// stream_options.include_usage without decoding the body.
func peekStream(body []byte) (stream, includeUsage bool) {
	v, ok := topLevelValue(body, "stream")
	if !ok || string(v) != "true" {
		return false, false
	}
	if opts, ok := topLevelValue(body, "stream_options"); ok {
		if u, ok := topLevelValue(opts, "include_usage"); ok && string(u) == "true" {
			includeUsage = true
		}
	}
	return true, includeUsage
}

// topLevelValue returns the raw value of key in the JSON object b, scanning
// without decoding. Keys with escapes are not matched.
func topLevelValue(b []byte, key string) ([]byte, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] == '}' {
			return nil, false
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '"' {
			return nil, false
		}
		ks := i + 1
		i = skipString(b, i)
		if i < 0 {
			return nil, false
		}
		k := b[ks : i-1]
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		vs := i
		i = skipValue(b, i)
		if i < 0 {
			return nil, false
		}
		if string(k) == key {
			return b[vs:i], true
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				if i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\n' && b[i] != '\r' && b[i] != '\t' {
		i++
	}
	return i
}
