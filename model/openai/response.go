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
	Content          string          `json:"content"`
	ReasoningContent string          `json:"reasoning_content"` // DeepSeek, vLLM
	Reasoning        string          `json:"reasoning"`         // OpenRouter, Ollama
	Refusal          string          `json:"refusal"`
	ToolCalls        []replyToolCall `json:"tool_calls"`
}

type replyToolCall struct {
	Index    int    `json:"index"` // only in stream deltas
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptCacheHitTokens int64 `json:"prompt_cache_hit_tokens"` // DeepSeek
}

func (u *usage) toLLM() llm.Usage {
	if u == nil {
		return llm.Usage{}
	}
	out := llm.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		out.CacheReadTokens = d.CachedTokens
	}
	if out.CacheReadTokens == 0 {
		out.CacheReadTokens = u.PromptCacheHitTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
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
		Usage:     r.Usage.toLLM(),
		Raw:       raw,
	}
	if ch.FinishReason != nil {
		resp.FinishReason = finishReason(*ch.FinishReason)
	}
	msg := llm.Message{Role: llm.RoleAssistant}
	reasoning := ch.Message.ReasoningContent
	if reasoning == "" {
		reasoning = ch.Message.Reasoning
	}
	if reasoning != "" {
		msg.Parts = append(msg.Parts, llm.Thinking{Text: reasoning})
	}
	text := ch.Message.Content + ch.Message.Refusal
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
	if msg.Parts == nil {
		msg.Parts = []llm.Part{}
	}
	resp.Message = msg
	return resp, true
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
