package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// appendRequest appends the JSON of body to dst, byte for byte what a
// json.Encoder with SetEscapeHTML(false) writes (without its newline),
// without reflection. Raw JSON values (schemas) are compacted as
// encoding/json compacts them. Anything it does not expect (a Content or
// ToolChoice of another type, a raw value that is not valid JSON, a float
// JSON cannot hold) makes it fail, and the caller encodes with
// encoding/json instead, which produces the same bytes or its own error.
// TestEncodeMatchesJSON and FuzzEncodeMatchesJSON check the equivalence.
func appendRequest(dst []byte, r *chatRequest) ([]byte, error) {
	dst = append(dst, '{')
	var err error
	if r.Model != "" {
		dst = append(dst, `"model":`...)
		dst = appendString(dst, r.Model)
		dst = append(dst, ',')
	}
	dst = append(dst, `"messages":`...)
	if r.Messages == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range r.Messages {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendMessage(dst, &r.Messages[i]); err != nil {
				return nil, err
			}
		}
		dst = append(dst, ']')
	}
	if len(r.Tools) > 0 {
		dst = append(dst, `,"tools":`...)
		dst = append(dst, '[')
		for i := range r.Tools {
			t := &r.Tools[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"type":`...)
			dst = appendString(dst, t.Type)
			dst = append(dst, `,"function":{"name":`...)
			dst = appendString(dst, t.Function.Name)
			if t.Function.Description != "" {
				dst = append(dst, `,"description":`...)
				dst = appendString(dst, t.Function.Description)
			}
			dst = append(dst, `,"parameters":`...)
			if dst, err = appendRaw(dst, t.Function.Parameters); err != nil {
				return nil, err
			}
			dst = append(dst, '}', '}')
		}
		dst = append(dst, ']')
	}
	switch c := r.ToolChoice.(type) {
	case nil:
	case string:
		dst = append(dst, `,"tool_choice":`...)
		dst = appendString(dst, c)
	case namedChoice:
		dst = append(dst, `,"tool_choice":`...)
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, c.Type)
		dst = append(dst, `,"function":{"name":`...)
		dst = appendString(dst, c.Function.Name)
		dst = append(dst, '}', '}')
	default:
		return nil, errFallback
	}
	if r.Temperature != nil {
		dst = append(dst, `,"temperature":`...)
		if dst, err = appendFloat(dst, *r.Temperature); err != nil {
			return nil, err
		}
	}
	if r.TopP != nil {
		dst = append(dst, `,"top_p":`...)
		if dst, err = appendFloat(dst, *r.TopP); err != nil {
			return nil, err
		}
	}
	if r.MaxCompletionTokens != 0 {
		dst = append(dst, `,"max_completion_tokens":`...)
		dst = strconv.AppendInt(dst, int64(r.MaxCompletionTokens), 10)
	}
	if r.MaxTokens != 0 {
		dst = append(dst, `,"max_tokens":`...)
		dst = strconv.AppendInt(dst, int64(r.MaxTokens), 10)
	}
	if len(r.Stop) > 0 {
		dst = append(dst, `,"stop":`...)
		dst = append(dst, '[')
		for i, s := range r.Stop {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, s)
		}
		dst = append(dst, ']')
	}
	if f := r.ResponseFormat; f != nil {
		dst = append(dst, `,"response_format":`...)
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, f.Type)
		dst = append(dst, `,"json_schema":{"name":`...)
		dst = appendString(dst, f.JSONSchema.Name)
		dst = append(dst, `,"schema":`...)
		if dst, err = appendRaw(dst, f.JSONSchema.Schema); err != nil {
			return nil, err
		}
		dst = append(dst, '}', '}')
	}
	if r.Stream {
		dst = append(dst, `,"stream":`...)
		dst = append(dst, "true"...)
	}
	if o := r.StreamOptions; o != nil {
		dst = append(dst, `,"stream_options":`...)
		dst = append(dst, `{"include_usage":`...)
		dst = strconv.AppendBool(dst, o.IncludeUsage)
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// errFallback says the fast encoder leaves the body to encoding/json.
var errFallback = errors.New("openai: encode with encoding/json")

func appendMessage(dst []byte, m *chatMessage) ([]byte, error) {
	dst = append(dst, `{"role":`...)
	dst = appendString(dst, m.Role)
	dst = append(dst, `,"content":`...)
	switch c := m.Content.(type) {
	case nil:
		dst = append(dst, "null"...)
	case string:
		dst = appendString(dst, c)
	case []contentPart:
		if c == nil {
			dst = append(dst, "null"...)
			break
		}
		dst = append(dst, '[')
		for i := range c {
			p := &c[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"type":`...)
			dst = appendString(dst, p.Type)
			if p.Text != "" {
				dst = append(dst, `,"text":`...)
				dst = appendString(dst, p.Text)
			}
			if p.ImageURL != nil {
				dst = append(dst, `,"image_url":{"url":`...)
				dst = appendString(dst, p.ImageURL.URL)
				dst = append(dst, '}')
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	default:
		return nil, errFallback
	}
	if len(m.ToolCalls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			c := &m.ToolCalls[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = appendString(dst, c.ID)
			dst = append(dst, `,"type":`...)
			dst = appendString(dst, c.Type)
			dst = append(dst, `,"function":{"name":`...)
			dst = appendString(dst, c.Function.Name)
			dst = append(dst, `,"arguments":`...)
			dst = appendString(dst, c.Function.Arguments)
			dst = append(dst, '}', '}')
		}
		dst = append(dst, ']')
	}
	if m.ToolCallID != "" {
		dst = append(dst, `,"tool_call_id":`...)
		dst = appendString(dst, m.ToolCallID)
	}
	return append(dst, '}'), nil
}

// appendRaw appends a json.RawMessage as encoding/json does: null when
// nil, else compacted (and checked).
func appendRaw(dst []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(dst, "null"...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, raw); err != nil {
		return nil, errFallback
	}
	return buf.Bytes(), nil
}

// appendFloat leaves floats to encoding/json, whose format has its own
// rules (exponents, NaN refused).
func appendFloat(dst []byte, f float64) ([]byte, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, errFallback
	}
	return append(dst, b...), nil
}

// safeByte marks the ASCII bytes a JSON string holds as they are.
var safeByte = func() (t [utf8.RuneSelf]bool) {
	for b := ' '; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string exactly as encoding/json does
// without HTML escaping: short escapes for \b \f \n \r \t, \u00XX for
// other control bytes, U+FFFD for invalid UTF-8, and U+2028 and U+2029
// escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if safeByte[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendSchema appends raw compacted, as appendRaw does.
func (m *Model) appendSchema(dst []byte, raw []byte) ([]byte, error) {
	if v, ok := m.schemas.Get(raw); ok {
		return append(dst, v...), nil
	}
	start := len(dst)
	dst, err := appendRaw(dst, raw)
	if err != nil || raw == nil {
		return dst, err
	}
	m.schemas.Put(raw, dst[start:])
	return dst, nil
}
