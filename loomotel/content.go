package loomotel

import (
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/loomkit/loom/llm"
)

// Content is recorded only with WithContentCapture, as JSON strings in the
// shapes of the conventions' input-messages, output-messages and
// system-instructions schemas (the Go API has no structured attribute
// values yet).

// inputContent returns the system instructions and input messages of req.
func inputContent(req llm.Request) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if req.System != "" {
		sys := []map[string]any{{"type": "text", "content": req.System}}
		if b, err := json.Marshal(sys); err == nil {
			attrs = append(attrs, semconv.GenAISystemInstructionsKey.String(string(b)))
		}
	}
	if a, ok := messagesAttr(semconv.GenAIInputMessagesKey, messagesJSON(req.Messages)); ok {
		attrs = append(attrs, a)
	}
	return attrs
}

// outputContent returns the output message of resp.
func outputContent(resp llm.Response) attribute.KeyValue {
	msgs := messagesJSON([]llm.Message{resp.Message})
	if len(msgs) == 0 {
		msgs = []map[string]any{{"role": string(llm.RoleAssistant), "parts": []map[string]any{}}}
	}
	for _, m := range msgs {
		m["finish_reason"] = finishReason(resp.FinishReason)
	}
	a, _ := messagesAttr(semconv.GenAIOutputMessagesKey, msgs)
	return a
}

func messagesAttr(k attribute.Key, msgs []map[string]any) (attribute.KeyValue, bool) {
	if msgs == nil {
		msgs = []map[string]any{}
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		return attribute.KeyValue{}, false
	}
	return k.String(string(b)), true
}

// finishReason maps loom's reasons onto the output-messages schema's,
// where they differ.
func finishReason(r llm.FinishReason) string {
	if r == llm.FinishToolCalls {
		return "tool_call"
	}
	return string(r)
}

// messagesJSON converts messages to the conventions' chat messages. Tool
// results, which loom carries in user messages, become messages of role
// "tool", in order.
func messagesJSON(msgs []llm.Message) []map[string]any {
	var out []map[string]any
	for _, m := range msgs {
		var cur map[string]any
		for _, p := range m.Parts {
			role := string(m.Role)
			if _, ok := p.(llm.ToolResult); ok {
				role = "tool"
			}
			parts := partsJSON(p)
			if len(parts) == 0 {
				continue
			}
			if cur == nil || cur["role"] != role {
				cur = map[string]any{"role": role, "parts": []map[string]any{}}
				out = append(out, cur)
			}
			cur["parts"] = append(cur["parts"].([]map[string]any), parts...)
		}
	}
	return out
}

// partsJSON converts one part; a tool result's images follow its response
// as parts of their own.
func partsJSON(p llm.Part) []map[string]any {
	switch p := p.(type) {
	case llm.Text:
		return []map[string]any{{"type": "text", "content": p.Text}}
	case llm.Thinking:
		if p.Text == "" {
			return nil // redacted or signature only: nothing readable
		}
		return []map[string]any{{"type": "reasoning", "content": p.Text}}
	case llm.ToolCall:
		part := map[string]any{"type": "tool_call", "id": p.ID, "name": p.Name}
		if p.ArgumentsError() == nil {
			part["arguments"] = json.RawMessage(p.Args())
		} else {
			part["arguments"] = p.Arguments
		}
		return []map[string]any{part}
	case llm.ToolResult:
		parts := []map[string]any{{"type": "tool_call_response", "id": p.CallID, "response": p.Content}}
		for _, img := range p.Images {
			parts = append(parts, imageJSON(img))
		}
		return parts
	case llm.Image:
		return []map[string]any{imageJSON(p)}
	}
	return nil
}

func imageJSON(img llm.Image) map[string]any {
	part := map[string]any{"modality": "image"}
	if img.MediaType != "" {
		part["mime_type"] = img.MediaType
	}
	if img.URL != "" {
		part["type"], part["uri"] = "uri", img.URL
	} else {
		part["type"], part["content"] = "blob", img.Data
	}
	return part
}
