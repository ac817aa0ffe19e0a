package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Role says who wrote a message. Tool results travel in a user message, as
// they do in the Anthropic format; adapters split them where a wire format
// wants one message per result.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one turn of a conversation: a role and its ordered parts.
type Message struct {
	Role  Role   `json:"role"`
	Parts []Part `json:"parts"`
}

// UserText returns a user message holding one text part.
func UserText(text string) Message {
	return Message{Role: RoleUser, Parts: []Part{Text{Text: text}}}
}

// AssistantText returns an assistant message holding one text part.
func AssistantText(text string) Message {
	return Message{Role: RoleAssistant, Parts: []Part{Text{Text: text}}}
}

// Text returns the text parts of m concatenated, without separators.
func (m Message) Text() string {
	var n int
	for _, p := range m.Parts {
		if t, ok := p.(Text); ok {
			n += len(t.Text)
		}
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range m.Parts {
		if t, ok := p.(Text); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// ToolCalls returns the tool calls of m in order. The slice is new; the calls
// are copies.
func (m Message) ToolCalls() []ToolCall {
	var calls []ToolCall
	for _, p := range m.Parts {
		if c, ok := p.(ToolCall); ok {
			calls = append(calls, c)
		}
	}
	return calls
}

// ToolResults returns the tool results of m in order.
func (m Message) ToolResults() []ToolResult {
	var rs []ToolResult
	for _, p := range m.Parts {
		if r, ok := p.(ToolResult); ok {
			rs = append(rs, r)
		}
	}
	return rs
}

// IsEmpty reports whether m carries nothing worth sending: no parts, or one
// empty text part.
func (m Message) IsEmpty() bool {
	switch len(m.Parts) {
	case 0:
		return true
	case 1:
		t, ok := m.Parts[0].(Text)
		return ok && t.Text == ""
	}
	return false
}

// Clone returns a copy of m whose parts slice is not shared with m.
func (m Message) Clone() Message {
	m.Parts = append([]Part(nil), m.Parts...)
	return m
}

// Part is one piece of a message. The set is closed: Text, Thinking,
// ToolCall, ToolResult and Image.
type Part interface {
	partType() string
}

// Text is plain text.
type Text struct {
	Text string `json:"text"`
}

// Thinking is a model's reasoning. Signature is the provider's opaque proof
// that must be sent back unchanged with the turn (Anthropic); Redacted holds
// encrypted reasoning the provider returned instead of text.
type Thinking struct {
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Redacted  string `json:"redacted,omitempty"`
}

// ToolCall is the model asking for a tool to run.
//
// Arguments is the JSON text exactly as the model produced it (empty means no
// arguments). Malformed is set when Arguments is not one JSON object; such a
// call is never executed with guessed arguments. Incomplete is set when the
// stream that carried the call ended before the call did; such a call is
// never executed at all.
//
// ID is unique within a run. When the provider sent no id, or an id it had
// already used in the same turn, the run machine mints one and keeps the
// provider's in ProviderID.
type ToolCall struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Arguments  string `json:"arguments,omitempty"`
	Malformed  bool   `json:"malformed,omitempty"`
	Incomplete bool   `json:"incomplete,omitempty"`
	ProviderID string `json:"provider_id,omitempty"`
}

// Args returns the arguments as JSON, with empty arguments as {}. It does
// not check that they are valid; see ArgumentsError.
func (c ToolCall) Args() json.RawMessage {
	if strings.TrimSpace(c.Arguments) == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(c.Arguments)
}

// ArgumentsError reports why the arguments are not one JSON object, or nil
// when they are (empty arguments count as {}).
func (c ToolCall) ArgumentsError() error {
	return checkArguments(c.Arguments)
}

func checkArguments(args string) error {
	s := strings.TrimSpace(args)
	if s == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("arguments must be a JSON object, got %s", jsonKind(v))
	}
	if dec.More() {
		return fmt.Errorf("arguments hold more than one JSON value")
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}

// ToolResult answers the tool call with id CallID. A failed tool is still a
// result: IsError is set and Content says what went wrong.
//
// Images are pictures the tool returned (a screenshot, a chart). They are
// sent to the model with the result where the provider allows images in a
// tool result (Anthropic), and right after the results otherwise (OpenAI
// Chat Completions, whose tool messages take text only). Each needs a URL,
// or data and a media type (see CheckImages). Content should still say in
// words what the images are, for consumers that read text only.
type ToolResult struct {
	CallID  string  `json:"call_id"`
	Name    string  `json:"name,omitempty"`
	Content string  `json:"content"`
	IsError bool    `json:"is_error,omitempty"`
	Images  []Image `json:"images,omitempty"`
}

// Image is a picture given by URL, or by its bytes and media type.
type Image struct {
	URL       string `json:"url,omitempty"`
	Data      []byte `json:"data,omitempty"`
	MediaType string `json:"media_type,omitempty"`
}

func (Text) partType() string       { return "text" }
func (Thinking) partType() string   { return "thinking" }
func (ToolCall) partType() string   { return "tool_call" }
func (ToolResult) partType() string { return "tool_result" }
func (Image) partType() string      { return "image" }

// MarshalJSON encodes the parts with a "type" tag each.
func (m Message) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"role":`)
	role, err := json.Marshal(m.Role)
	if err != nil {
		return nil, err
	}
	b.Write(role)
	b.WriteString(`,"parts":[`)
	for i, p := range m.Parts {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := appendPart(&b, p); err != nil {
			return nil, err
		}
	}
	b.WriteString("]}")
	return b.Bytes(), nil
}

// MarshalPart encodes one part with its "type" tag.
func MarshalPart(p Part) ([]byte, error) {
	var b bytes.Buffer
	if err := appendPart(&b, p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func appendPart(b *bytes.Buffer, p Part) error {
	if p == nil {
		return fmt.Errorf("llm: nil part")
	}
	return appendTagged(b, p.partType(), p)
}

// appendTagged writes v's JSON object with a leading "type" member.
func appendTagged(b *bytes.Buffer, tag string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b.WriteString(`{"type":"`)
	b.WriteString(tag)
	b.WriteByte('"')
	if len(body) > 2 { // body is "{...}"; splice its fields after the tag
		b.WriteByte(',')
		b.Write(body[1:])
	} else {
		b.WriteByte('}')
	}
	return nil
}

// UnmarshalJSON decodes a message, refusing unknown part types and fields.
func (m *Message) UnmarshalJSON(data []byte) error {
	var raw struct {
		Role  Role              `json:"role"`
		Parts []json.RawMessage `json:"parts"`
	}
	if err := strictUnmarshal(data, &raw); err != nil {
		return fmt.Errorf("llm: message: %w", err)
	}
	switch raw.Role {
	case RoleUser, RoleAssistant:
	case "":
		// The zero Message (no role, no parts) encodes this way; it
		// stands for "no message", e.g. the final answer of a run that
		// was cancelled before one came.
		if len(raw.Parts) == 0 {
			*m = Message{}
			return nil
		}
		return fmt.Errorf("llm: message: a message with parts needs a role (%q or %q)", RoleUser, RoleAssistant)
	default:
		return fmt.Errorf("llm: message: unknown role %q (want %q or %q)", raw.Role, RoleUser, RoleAssistant)
	}
	var parts []Part
	if len(raw.Parts) > 0 {
		parts = make([]Part, 0, len(raw.Parts))
	}
	for i, rp := range raw.Parts {
		p, err := UnmarshalPart(rp)
		if err != nil {
			return fmt.Errorf("llm: message part %d: %w", i, err)
		}
		parts = append(parts, p)
	}
	m.Role, m.Parts = raw.Role, parts
	return nil
}

// UnmarshalPart decodes one part encoded by MarshalPart, strictly (see
// UnmarshalExact): an unknown part type or member, a member spelt in
// another case or given twice is refused.
func UnmarshalPart(data []byte) (Part, error) {
	var tag struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &tag); err != nil {
		return nil, err
	}
	// Each part is decoded with its "type" member beside its own, so
	// that one strict pass checks them all.
	switch tag.Type {
	case "text":
		var p struct {
			Type string `json:"type"`
			Text
		}
		return p.Text, strictUnmarshal(data, &p)
	case "thinking":
		var p struct {
			Type string `json:"type"`
			Thinking
		}
		return p.Thinking, strictUnmarshal(data, &p)
	case "tool_call":
		var p struct {
			Type string `json:"type"`
			ToolCall
		}
		return p.ToolCall, strictUnmarshal(data, &p)
	case "tool_result":
		var p struct {
			Type string `json:"type"`
			ToolResult
		}
		return p.ToolResult, strictUnmarshal(data, &p)
	case "image":
		var p struct {
			Type string `json:"type"`
			Image
		}
		return p.Image, strictUnmarshal(data, &p)
	case "":
		return nil, fmt.Errorf("part has no type")
	}
	return nil, fmt.Errorf("unknown part type %q", tag.Type)
}

func strictUnmarshal(data []byte, v any) error {
	return UnmarshalExact(data, v)
}

// withoutType returns the object data without its "type" member, so the
// remaining fields can be decoded strictly.
func withoutType(data []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, err
	}
	delete(fields, "type")
	return json.Marshal(fields)
}
