package openai

import (
	"encoding/json"
	"strings"

	"github.com/loomkit/loom/llm"
)

// The blocking response body.
type chatResponse struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Choices []choice        `json:"choices"`
	Usage   *usage          `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type choice struct {
	Index        int          `json:"index"`
	Message      replyMessage `json:"message"`
	FinishReason *string      `json:"finish_reason"`
}

type replyMessage struct {
	Content          content         `json:"content"`
	ReasoningContent string          `json:"reasoning_content"` // DeepSeek, vLLM
	Reasoning        string          `json:"reasoning"`         // OpenRouter, Ollama
	Refusal          string          `json:"refusal"`
	ToolCalls        []replyToolCall `json:"tool_calls"`
	FunctionCall     *replyFunction  `json:"function_call"` // the legacy single call
}

type replyToolCall struct {
	Index    int           `json:"index"` // only in stream deltas
	ID       string        `json:"id"`
	Type     string        `json:"type"`
	Function replyFunction `json:"function"`
}

type replyFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// content is a message's content: a string, or an array of chunks, as
// Mistral's reasoning models send it. Text chunks are text; thinking
// chunks, whose thinking is an array of text chunks, are reasoning; chunks
// of other types (references, images) carry nothing loom keeps.
type content struct {
	Text     string
	Thinking string
}

// contentChunk is one element of a content array.
type contentChunk struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking json.RawMessage `json:"thinking"`
}

func (c *content) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case 'n': // null leaves the content alone, as for a string
		return nil
	case '"':
		return json.Unmarshal(b, &c.Text)
	}
	var chunks []contentChunk
	if err := json.Unmarshal(b, &chunks); err != nil {
		return err
	}
	var text, thinking strings.Builder
	for _, ch := range chunks {
		switch ch.Type {
		case "text":
			text.WriteString(ch.Text)
		case "thinking":
			if err := appendThinking(&thinking, ch.Thinking); err != nil {
				return err
			}
		}
	}
	*c = content{Text: text.String(), Thinking: thinking.String()}
	return nil
}

// appendThinking adds the text of a thinking chunk's thinking: an array of
// text chunks (or, from some servers, a string).
func appendThinking(b *strings.Builder, raw json.RawMessage) error {
	if len(raw) == 0 || raw[0] == 'n' {
		return nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		b.WriteString(s)
		return err
	}
	var inner []contentChunk
	if err := json.Unmarshal(raw, &inner); err != nil {
		return err
	}
	for _, in := range inner {
		if in.Type == "text" {
			b.WriteString(in.Text)
		}
	}
	return nil
}

type usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptCacheHitTokens int64 `json:"prompt_cache_hit_tokens"` // DeepSeek
}

// toLLM maps a usage object, and says which counts it reports: prompt
// and completion tokens always, cache reads and reasoning when their
// details (or DeepSeek's cache hits) are there.
//
// prompt_tokens includes cached input, as llm.Usage.InputTokens does.
// completion_tokens includes reasoning at OpenAI, not at xAI or Gemini's
// OpenAI endpoint, whose total_tokens adds the reasoning to prompt and
// completion: when total_tokens says so, or when the reasoning exceeds the
// completion (so it cannot be a part of it), the reasoning is added to
// OutputTokens, which counts every generated token.
func (u *usage) toLLM() (llm.Usage, llm.UsageFields) {
	if u == nil {
		return llm.Usage{}, 0
	}
	out := llm.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	reported := llm.UsageInput | llm.UsageOutput
	if d := u.PromptTokensDetails; d != nil {
		out.CacheReadTokens = d.CachedTokens
		reported |= llm.UsageCacheRead
	}
	if out.CacheReadTokens == 0 && u.PromptCacheHitTokens != 0 {
		out.CacheReadTokens = u.PromptCacheHitTokens
		reported |= llm.UsageCacheRead
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
		reported |= llm.UsageReasoning
		r := d.ReasoningTokens
		if r > 0 && (r > u.CompletionTokens ||
			u.TotalTokens == u.PromptTokens+u.CompletionTokens+r && u.TotalTokens != u.PromptTokens+u.CompletionTokens) {
			out.OutputTokens += r
		}
	}
	return out, reported
}

// finishReason maps the API's finish_reason.
func finishReason(s string) llm.FinishReason {
	switch s {
	case "":
		return ""
	case "stop":
		return llm.FinishStop
	case "length":
		return llm.FinishLength
	case "tool_calls", "function_call":
		return llm.FinishToolCalls
	case "content_filter":
		return llm.FinishContentFilter
	}
	return llm.FinishOther
}

// toResponse maps a decoded blocking body. The first choice with index 0
// is the answer (the adapter never asks for more than one).
func (r *chatResponse) toResponse(requestID string, raw []byte) (llm.Response, bool) {
	var ch *choice
	for i := range r.Choices {
		if r.Choices[i].Index == 0 {
			ch = &r.Choices[i]
			break
		}
	}
	if ch == nil {
		return llm.Response{}, false
	}
	resp := llm.Response{
		ID:        r.ID,
		Model:     r.Model,
		RequestID: requestID,
		Raw:       raw,
	}
	resp.Usage, _ = r.Usage.toLLM()
	if ch.FinishReason != nil {
		resp.FinishReason = finishReason(*ch.FinishReason)
	}
	msg := llm.Message{Role: llm.RoleAssistant}
	reasoning := ch.Message.ReasoningContent
	if reasoning == "" {
		reasoning = ch.Message.Reasoning
	}
	if t := ch.Message.Content.Thinking; t != "" {
		reasoning += t
	}
	if reasoning != "" {
		msg.Parts = append(msg.Parts, llm.Thinking{Text: reasoning})
	}
	text := ch.Message.Content.Text + ch.Message.Refusal
	if text != "" {
		msg.Parts = append(msg.Parts, llm.Text{Text: text})
	}
	for _, tc := range ch.Message.ToolCalls {
		args, ok := normalizeArguments(tc.Function.Arguments)
		msg.Parts = append(msg.Parts, llm.ToolCall{
			ID:         tc.ID,
			Name:       tc.Function.Name,
			Arguments:  args,
			Malformed:  !ok,
			Incomplete: resp.FinishReason == llm.FinishLength,
		})
	}
	if fc := ch.Message.FunctionCall; fc != nil && (fc.Name != "" || fc.Arguments != "") {
		args, ok := normalizeArguments(fc.Arguments)
		msg.Parts = append(msg.Parts, llm.ToolCall{
			ID:         legacyCallID(r.ID),
			Name:       fc.Name,
			Arguments:  args,
			Malformed:  !ok,
			Incomplete: resp.FinishReason == llm.FinishLength,
		})
	}
	if msg.Parts == nil {
		msg.Parts = []llm.Part{}
	}
	resp.Message = msg
	return resp, true
}

// legacyCallID is the id of the call of a legacy function_call answer,
// which has none: made from the response's id, so that the blocking and
// the streamed answer agree and answers of one run differ (without a
// response id it is empty, and the run machine mints one).
func legacyCallID(responseID string) string {
	if responseID == "" {
		return ""
	}
	return "call_" + responseID
}

// normalizeArguments is llm.NormalizeArguments, answering the common case
// (the arguments are one JSON object) with a validity check instead of a
// decoder; FuzzNormalizeArguments checks that the two agree.
func normalizeArguments(raw string) (string, bool) {
	if s := strings.TrimSpace(raw); len(s) > 0 && s[0] == '{' && json.Valid([]byte(s)) {
		return s, true
	}
	return llm.NormalizeArguments(raw)
}
