package anthropic

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/internal/wire"
)

// imageLimits are the API's bounds on the images of a request: 100
// images, sides of at most 2000 pixels when there are more than 20, and
// 32 MB for the whole request (of which the images may take 28).
var imageLimits = wire.ImageLimits{MaxImages: 100, ManyImages: 20, ManySide: 2000, MaxBase64: 28 << 20}

// encodeRequest writes the Messages request body for req in one pass: the
// history is checked, then every value is appended as JSON text, with no
// intermediate structs and no re-encoding of nested values. The oldest
// images are left out when the request would pass imageLimits.
func (m *Model) encodeRequest(req llm.Request, stream bool, op string) ([]byte, error) {
	if err := llm.CheckHistory(req.Messages); err != nil {
		return nil, &model.Error{Kind: model.KindBadRequest, Op: op, Message: "the history breaks tool-call pairing; the request was not sent", Err: err}
	}
	if err := llm.CheckImages(req.Messages); err != nil {
		return nil, &model.Error{Kind: model.KindBadRequest, Op: op, Message: "the history holds an image that cannot be sent; the request was not sent", Err: err}
	}
	lim := imageLimits
	if n := m.cfg.MaxImages; n > 0 && n < lim.MaxImages {
		lim.MaxImages = n
		lim.ManyImages = min(lim.ManyImages, n)
	}
	req.Messages, _ = wire.FitImages(req.Messages, lim)
	modelName := req.Model
	if modelName == "" {
		modelName = m.cfg.Model
	}
	if modelName == "" {
		return nil, badRequest(op, "no model: set Config.Model or Request.Model")
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = m.maxTokens
	}
	var outSchema []byte
	if req.Schema != nil && !m.cfg.NoStructuredOutput {
		raw := bytes.TrimSpace(req.Schema.Schema)
		if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
			return nil, badRequest(op, fmt.Sprintf("the output schema (Request.Schema %q) is not a JSON object", req.Schema.Name))
		}
		fit, err := m.fitSchema(raw)
		if err != nil && !errors.Is(err, errSchemaUnfit) {
			return nil, badRequest(op, fmt.Sprintf("the output schema (Request.Schema %q) is not a JSON object: %v", req.Schema.Name, err))
		}
		outSchema = fit // nil when unfit: the answer is validated by the caller only
	}
	tools := req.Tools
	var choice []byte
	if len(tools) > 0 || req.ToolChoice.Mode != llm.ToolAuto {
		allowed, err := req.ToolChoice.Allowed(tools)
		if err != nil {
			return nil, badRequest(op, err.Error())
		}
		switch req.ToolChoice.Mode {
		case llm.ToolRequired:
			choice = []byte(`{"type":"any"}`)
		case llm.ToolNone:
			choice = []byte(`{"type":"none"}`)
		case llm.ToolSpecific:
			if len(req.ToolChoice.Names) == 1 {
				choice = appendJSONString([]byte(`{"type":"tool","name":`), req.ToolChoice.Names[0])
				choice = append(choice, '}')
			} else {
				// Anthropic names one tool or any tool: offer only the
				// named ones and require one of them.
				choice = []byte(`{"type":"any"}`)
				kept := make([]llm.ToolSpec, 0, len(allowed))
				for _, t := range tools {
					if allowed[t.Name] {
						kept = append(kept, t)
					}
				}
				tools = kept
			}
		}
	}

	size := 256 + len(req.System) + len(outSchema)
	for _, msg := range req.Messages {
		size += 32
		for _, p := range msg.Parts {
			size += partSize(p)
		}
	}
	for _, t := range tools {
		size += 64 + len(t.Name) + len(t.Description) + len(t.Schema)
	}
	b := make([]byte, 0, size)
	b = append(b, `{"model":`...)
	b = appendJSONString(b, modelName)
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(maxTokens), 10)
	if req.System != "" {
		b = append(b, `,"system":`...)
		b = appendJSONString(b, req.System)
	}
	b = append(b, `,"messages":[`...)
	first := true
	for i, msg := range req.Messages {
		var err error
		var wrote bool
		b, wrote, err = appendMessage(b, msg, first)
		if err != nil {
			return nil, badRequest(op, fmt.Sprintf("message %d: %v", i, err))
		}
		if wrote {
			first = false
		}
	}
	b = append(b, ']')
	if len(tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i, t := range tools {
			if !validToolName(t.Name) {
				return nil, badRequest(op, fmt.Sprintf("tool %q: Anthropic tool names must match ^[a-zA-Z0-9_-]{1,64}$; rename the tool", t.Name))
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = appendJSONString(b, t.Name)
			if t.Description != "" {
				b = append(b, `,"description":`...)
				b = appendJSONString(b, t.Description)
			}
			b = append(b, `,"input_schema":`...)
			schema := bytes.TrimSpace(t.Schema)
			if len(schema) == 0 {
				schema = []byte(`{"type":"object"}`)
			} else if schema[0] != '{' || !json.Valid(schema) {
				return nil, badRequest(op, fmt.Sprintf("tool %q: the schema is not a JSON object", t.Name))
			}
			b = append(b, schema...)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if choice != nil {
		b = append(b, `,"tool_choice":`...)
		b = append(b, choice...)
	}
	if req.Temperature != nil {
		b = append(b, `,"temperature":`...)
		b = strconv.AppendFloat(b, *req.Temperature, 'g', -1, 64)
	}
	if req.TopP != nil {
		b = append(b, `,"top_p":`...)
		b = strconv.AppendFloat(b, *req.TopP, 'g', -1, 64)
	}
	if len(req.Stop) > 0 {
		b = append(b, `,"stop_sequences":[`...)
		for i, s := range req.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		b = append(b, ']')
	}
	if m.cfg.ThinkingBudget > 0 {
		b = append(b, `,"thinking":{"type":"enabled","budget_tokens":`...)
		b = strconv.AppendInt(b, int64(m.cfg.ThinkingBudget), 10)
		b = append(b, '}')
	}
	if outSchema != nil {
		b = append(b, `,"output_config":{"format":{"type":"json_schema","schema":`...)
		b = append(b, outSchema...)
		b = append(b, "}}"...)
	}
	if stream {
		b = append(b, `,"stream":true`...)
	}
	b = append(b, '}')
	return b, nil
}

func badRequest(op, msg string) *model.Error {
	return &model.Error{Kind: model.KindBadRequest, Op: op, Message: msg + "; the request was not sent"}
}

func partSize(p llm.Part) int {
	switch p := p.(type) {
	case llm.Text:
		return 32 + len(p.Text) + len(p.Text)/16
	case llm.Thinking:
		return 64 + len(p.Text) + len(p.Signature) + len(p.Redacted)
	case llm.ToolCall:
		return 64 + len(p.ID) + len(p.Name) + len(p.Arguments)
	case llm.ToolResult:
		n := 64 + len(p.CallID) + len(p.Content) + len(p.Content)/16
		for _, img := range p.Images {
			n += partSize(img) + len(p.Name)
		}
		return n
	case llm.Image:
		return 96 + len(p.URL) + len(p.Data)*4/3
	}
	return 0
}

// appendMessage appends msg as a Messages message; it writes nothing (and
// reports false) when msg holds nothing Anthropic would accept.
//
// A user message puts its tool results first, in order, then its other
// parts: Anthropic requires results before any text. A result's images go
// inside it, after its text; a failed result may hold only text, so its
// images follow the results, each group after a text block naming the
// call. An assistant message keeps its parts in order; thinking without a
// signature (from another provider) is left out, as Anthropic refuses it.
func appendMessage(b []byte, msg llm.Message, first bool) ([]byte, bool, error) {
	start := len(b)
	if !first {
		b = append(b, ',')
	}
	b = append(b, `{"role":`...)
	b = appendJSONString(b, string(msg.Role))
	b = append(b, `,"content":[`...)
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	switch msg.Role {
	case llm.RoleUser:
		for _, p := range msg.Parts {
			if r, ok := p.(llm.ToolResult); ok {
				sep()
				var err error
				if b, err = appendToolResult(b, r); err != nil {
					return nil, false, err
				}
			}
		}
		for _, p := range msg.Parts {
			r, ok := p.(llm.ToolResult)
			if !ok || !r.IsError || len(r.Images) == 0 {
				continue
			}
			sep()
			b = appendText(b, wire.ImagesCaption(SanitizeID(r.CallID), r.Name))
			for i, img := range r.Images {
				sep()
				var err error
				if b, err = appendImage(b, img); err != nil {
					return nil, false, fmt.Errorf("the result for %q, image %d: %v", r.CallID, i, err)
				}
			}
		}
		for _, p := range msg.Parts {
			switch p := p.(type) {
			case llm.ToolResult:
			case llm.Text:
				if p.Text == "" {
					continue
				}
				sep()
				b = appendText(b, p.Text)
			case llm.Image:
				sep()
				var err error
				if b, err = appendImage(b, p); err != nil {
					return nil, false, err
				}
			case llm.Thinking:
				return nil, false, fmt.Errorf("a user message holds a thinking part")
			default:
				return nil, false, fmt.Errorf("a user message holds a %T part", p)
			}
		}
	case llm.RoleAssistant:
		for _, p := range msg.Parts {
			switch p := p.(type) {
			case llm.Text:
				if p.Text == "" {
					continue
				}
				sep()
				b = appendText(b, p.Text)
			case llm.Thinking:
				switch {
				case p.Redacted != "":
					sep()
					b = append(b, `{"type":"redacted_thinking","data":`...)
					b = appendJSONString(b, p.Redacted)
					b = append(b, '}')
				case p.Signature != "":
					sep()
					b = append(b, `{"type":"thinking","thinking":`...)
					b = appendJSONString(b, p.Text)
					b = append(b, `,"signature":`...)
					b = appendJSONString(b, p.Signature)
					b = append(b, '}')
				}
			case llm.ToolCall:
				sep()
				b = append(b, `{"type":"tool_use","id":`...)
				b = appendJSONString(b, SanitizeID(p.ID))
				b = append(b, `,"name":`...)
				b = appendJSONString(b, p.Name)
				b = append(b, `,"input":`...)
				b = appendInput(b, p)
				b = append(b, '}')
			case llm.Image:
				return nil, false, fmt.Errorf("an assistant message holds an image")
			default:
				return nil, false, fmt.Errorf("an assistant message holds a %T part", p)
			}
		}
	default:
		return nil, false, fmt.Errorf("unknown role %q", msg.Role)
	}
	if n == 0 {
		return b[:start], false, nil
	}
	b = append(b, "]}"...)
	return b, true, nil
}

// appendToolResult appends r as a tool_result block. Its content is a
// string, or, when r has images and did not fail, an array: a text block
// (unless the text is empty) and an image block per image. Anthropic
// refuses anything but text in a result marked is_error; appendMessage
// sends the images of such a result after the results.
func appendToolResult(b []byte, r llm.ToolResult) ([]byte, error) {
	b = append(b, `{"type":"tool_result","tool_use_id":`...)
	b = appendJSONString(b, SanitizeID(r.CallID))
	switch {
	case len(r.Images) > 0 && !r.IsError:
		b = append(b, `,"content":[`...)
		if r.Content != "" {
			b = appendText(b, r.Content)
			b = append(b, ',')
		}
		for i, img := range r.Images {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendImage(b, img); err != nil {
				return nil, fmt.Errorf("the result for %q, image %d: %v", r.CallID, i, err)
			}
		}
		b = append(b, ']')
	case r.Content != "":
		b = append(b, `,"content":`...)
		b = appendJSONString(b, r.Content)
	}
	if r.IsError {
		b = append(b, `,"is_error":true`...)
	}
	return append(b, '}'), nil
}

func appendText(b []byte, text string) []byte {
	b = append(b, `{"type":"text","text":`...)
	b = appendJSONString(b, text)
	return append(b, '}')
}

// appendInput appends a call's arguments as the tool_use input object.
// Arguments that are not one JSON object (a malformed or cut call, which
// was never run and was answered with an error result) are sent as {}:
// the request stays valid, and the result tells the model what went wrong.
func appendInput(b []byte, c llm.ToolCall) []byte {
	args := bytes.TrimSpace([]byte(c.Arguments))
	if len(args) == 0 || c.Malformed || args[0] != '{' || !json.Valid(args) {
		return append(b, "{}"...)
	}
	return append(b, args...)
}

func appendImage(b []byte, img llm.Image) ([]byte, error) {
	switch {
	case len(img.Data) > 0:
		if img.MediaType == "" {
			return nil, fmt.Errorf("an image has data but no media type")
		}
		b = append(b, `{"type":"image","source":{"type":"base64","media_type":`...)
		b = appendJSONString(b, img.MediaType)
		b = append(b, `,"data":"`...)
		b = base64.StdEncoding.AppendEncode(b, img.Data)
		b = append(b, `"}}`...)
	case img.URL != "":
		b = append(b, `{"type":"image","source":{"type":"url","url":`...)
		b = appendJSONString(b, img.URL)
		b = append(b, `}}`...)
	default:
		return nil, fmt.Errorf("an image has neither data nor a URL")
	}
	return b, nil
}

func validToolName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !idByte(name[i]) {
			return false
		}
	}
	return true
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// SanitizeID returns a tool-call id Anthropic accepts (^[a-zA-Z0-9_-]+$).
// A valid id is returned unchanged. Otherwise every other byte becomes '_'
// and "_" plus 12 hex digits of the original's SHA-256 is appended, so the
// mapping is deterministic (a call and its result map alike, in every
// request) and ids that differ only in replaced characters stay distinct.
// An empty id maps to "id_" plus the hash of nothing.
func SanitizeID(id string) string {
	ok := id != ""
	for i := 0; i < len(id) && ok; i++ {
		ok = idByte(id[i])
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	b := make([]byte, 0, len(id)+16)
	if id == "" {
		b = append(b, "id"...)
	}
	for i := 0; i < len(id); i++ {
		if idByte(id[i]) {
			b = append(b, id[i])
		} else {
			b = append(b, '_')
		}
	}
	b = append(b, '_')
	b = hex.AppendEncode(b, sum[:6])
	return string(b)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaping as encoding/json
// does (quotes, backslashes, control characters, U+2028 and U+2029), and
// replacing invalid UTF-8 with U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
