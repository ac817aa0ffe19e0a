package openai

import (
	"strconv"
	"strings"

	"github.com/loomkit/loom/llm"
)

// The direct encoder writes the body of the common requests straight from
// llm types, without building a chatRequest first: the same bytes as
// appendRequest(buildBody(req)), with fewer allocations and less work.
// direct says which requests it takes; TestDirectMatchesBuildBody and
// FuzzDirectMatchesBuildBody check the equivalence.

// direct reports whether req has only the message shapes the direct
// encoder writes: assistant messages, and user messages that are one text
// part or only tool results without images. Anything else (images, in
// parts or in results, mixed user messages, other roles) takes the general
// path.
func direct(req llm.Request) bool {
	for _, msg := range req.Messages {
		switch msg.Role {
		case llm.RoleAssistant:
		case llm.RoleUser:
			if len(msg.Parts) == 0 {
				return false
			}
			if len(msg.Parts) == 1 {
				if _, ok := msg.Parts[0].(llm.Text); ok {
					continue
				}
			}
			for _, p := range msg.Parts {
				if r, ok := p.(llm.ToolResult); !ok || len(r.Images) > 0 {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// appendDirect appends the body of req, which the caller checked (history,
// model name, tool choice) and direct accepted. ok is false when a value
// needs encoding/json (a raw schema that is not valid JSON, a float it
// formats or refuses); the caller then takes the general path.
func (m *Model) appendDirect(dst []byte, req llm.Request, stream bool, model string) (out []byte, ok bool) {
	var err error
	dst = append(dst, '{')
	if model != "" {
		dst = append(dst, `"model":`...)
		dst = appendString(dst, model)
		dst = append(dst, ',')
	}
	dst = append(dst, `"messages":[`...)
	n := 0 // messages written
	next := func() {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
	}
	if req.System != "" {
		next()
		dst = append(dst, `{"role":"system","content":`...)
		dst = appendString(dst, req.System)
		dst = append(dst, '}')
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case llm.RoleAssistant:
			next()
			dst = appendAssistant(dst, msg)
		case llm.RoleUser:
			if t, ok := msg.Parts[0].(llm.Text); ok && len(msg.Parts) == 1 {
				next()
				dst = append(dst, `{"role":"user","content":`...)
				dst = appendString(dst, t.Text)
				dst = append(dst, '}')
				continue
			}
			for _, p := range msg.Parts {
				r := p.(llm.ToolResult) // direct saw to it
				next()
				dst = append(dst, `{"role":"tool","content":`...)
				if r.IsError {
					// The format has no error flag: say it in words.
					dst = appendString(dst, "Error: "+r.Content)
				} else {
					dst = appendString(dst, r.Content)
				}
				if r.CallID != "" {
					dst = append(dst, `,"tool_call_id":`...)
					dst = appendString(dst, r.CallID)
				}
				dst = append(dst, '}')
			}
		}
	}
	dst = append(dst, ']')
	if len(req.Tools) > 0 {
		dst = append(dst, `,"tools":[`...)
		for i, t := range req.Tools {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"type":"function","function":{"name":`...)
			dst = appendString(dst, t.Name)
			if t.Description != "" {
				dst = append(dst, `,"description":`...)
				dst = appendString(dst, t.Description)
			}
			dst = append(dst, `,"parameters":`...)
			if dst, err = m.appendSchema(dst, toolParams(t)); err != nil {
				return nil, false
			}
			dst = append(dst, '}', '}')
		}
		dst = append(dst, ']')
	}
	switch req.ToolChoice.Mode {
	case llm.ToolRequired:
		dst = append(dst, `,"tool_choice":"required"`...)
	case llm.ToolNone:
		if len(req.Tools) > 0 {
			dst = append(dst, `,"tool_choice":"none"`...)
		}
	case llm.ToolSpecific:
		if len(req.ToolChoice.Names) == 1 {
			dst = append(dst, `,"tool_choice":{"type":"function","function":{"name":`...)
			dst = appendString(dst, req.ToolChoice.Names[0])
			dst = append(dst, '}', '}')
		} else {
			// Chat Completions can force one named function or any of
			// them, not a subset: several names become "required".
			dst = append(dst, `,"tool_choice":"required"`...)
		}
	}
	if req.Temperature != nil {
		dst = append(dst, `,"temperature":`...)
		if dst, err = appendFloat(dst, *req.Temperature); err != nil {
			return nil, false
		}
	}
	if req.TopP != nil {
		dst = append(dst, `,"top_p":`...)
		if dst, err = appendFloat(dst, *req.TopP); err != nil {
			return nil, false
		}
	}
	if max := m.maxTokens(req); max != 0 {
		if m.cfg.LegacyMaxTokens {
			dst = append(dst, `,"max_tokens":`...)
		} else {
			dst = append(dst, `,"max_completion_tokens":`...)
		}
		dst = strconv.AppendInt(dst, int64(max), 10)
	}
	if len(req.Stop) > 0 {
		dst = append(dst, `,"stop":[`...)
		for i, s := range req.Stop {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, s)
		}
		dst = append(dst, ']')
	}
	if s := req.Schema; s != nil {
		dst = append(dst, `,"response_format":{"type":"json_schema","json_schema":{"name":`...)
		dst = appendString(dst, s.Name)
		dst = append(dst, `,"schema":`...)
		if dst, err = appendRaw(dst, s.Schema); err != nil {
			return nil, false
		}
		dst = append(dst, '}', '}')
	}
	if stream {
		dst = append(dst, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	return append(dst, '}'), true
}

// appendAssistant writes an assistant message as assistantMessage maps
// it: its text (parts joined) and its tool calls; thinking and anything
// else is not sent back.
func appendAssistant(dst []byte, msg llm.Message) []byte {
	var text string
	texts, calls := 0, 0
	for _, p := range msg.Parts {
		switch p := p.(type) {
		case llm.Text:
			text += p.Text
			texts++
		case llm.ToolCall:
			calls++
		}
	}
	dst = append(dst, `{"role":"assistant","content":`...)
	if texts > 0 || calls == 0 {
		dst = appendString(dst, text)
	} else {
		dst = append(dst, "null"...)
	}
	if calls > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		first := true
		for _, p := range msg.Parts {
			c, ok := p.(llm.ToolCall)
			if !ok {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			args := c.Arguments
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			dst = append(dst, `{"id":`...)
			dst = appendString(dst, c.ID)
			dst = append(dst, `,"type":"function","function":{"name":`...)
			dst = appendString(dst, c.Name)
			dst = append(dst, `,"arguments":`...)
			dst = appendString(dst, args)
			dst = append(dst, '}', '}')
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}
