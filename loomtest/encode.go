package loomtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/loomkit/loom/llm"
)

// created is the fixed creation time of OpenAI responses, so encodings are
// made once and replayed.
const created = 1767225600 // 2026-01-01T00:00:00Z

func encode(f Format, t *Turn, index int) *encoded {
	id, model := t.ID, t.Model
	if model == "" {
		model = "loomtest-model"
	}
	if f == Anthropic {
		if id == "" {
			id = "msg_loomtest_" + slotName(index)
		}
		return encodeAnthropic(t, id, model, index)
	}
	if id == "" {
		id = "chatcmpl-loomtest-" + slotName(index)
	}
	return encodeOpenAI(t, id, model, index)
}

func slotName(index int) string {
	if index < 0 {
		return "func"
	}
	return fmt.Sprint(index + 1)
}

func callID(f Format, c llm.ToolCall, index, j int) string {
	if c.ID != "" {
		return c.ID
	}
	if f == Anthropic {
		return fmt.Sprintf("toolu_lt%s_%d", slotName(index), j)
	}
	return fmt.Sprintf("call_lt%s_%d", slotName(index), j)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("loomtest: encode %T: %v", v, err)) // only our own types are encoded
	}
	return b
}

// chunks splits s into pieces of at most n bytes on rune boundaries; n <= 0
// means one piece. It always returns at least one piece.
func chunks(s string, n int) []string {
	if n <= 0 || len(s) <= n {
		return []string{s}
	}
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			_, cut = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func sseFrame(event string, data []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(event) + len(data) + 16)
	if event != "" {
		b.WriteString("event: ")
		b.WriteString(event)
		b.WriteByte('\n')
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes()
}

func pingFrame(f Format) []byte {
	if f == Anthropic {
		return []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n")
	}
	return []byte(": ping\n\n")
}

// --- Anthropic Messages ---

type antUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

type antTextBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type antThinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type antRedactedBlock struct {
	Type string `json:"type"`
	Data string `json:"data"`
}

type antToolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type antMessage struct {
	ID           string   `json:"id"`
	Type         string   `json:"type"`
	Role         string   `json:"role"`
	Model        string   `json:"model"`
	Content      []any    `json:"content"`
	StopReason   *string  `json:"stop_reason"`
	StopSequence *string  `json:"stop_sequence"`
	Usage        antUsage `json:"usage"`
}

func anthropicStopReason(t *Turn) string {
	if t.StopReason != "" {
		return t.StopReason
	}
	switch t.finish() {
	case llm.FinishLength:
		return "max_tokens"
	case llm.FinishToolCalls:
		return "tool_use"
	case llm.FinishContentFilter:
		return "refusal"
	case llm.FinishPause:
		return "pause_turn"
	}
	return "end_turn"
}

// toolInput returns a call's arguments as the value of a blocking
// tool_use input: the object itself, or, when the arguments are not one
// JSON object, a JSON string holding them.
func toolInput(args string) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}")
	}
	if (llm.ToolCall{Arguments: args}).ArgumentsError() == nil {
		var b bytes.Buffer
		if json.Compact(&b, []byte(args)) == nil {
			return b.Bytes()
		}
	}
	return mustJSON(args)
}

// usageOf writes u, which counts cached input in InputTokens as llm.Usage
// does, the way Anthropic reports it: input_tokens without the cache
// reads and writes.
func usageOf(u llm.Usage) antUsage {
	return antUsage{
		InputTokens:              max(u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, 0),
		CacheCreationInputTokens: u.CacheWriteTokens,
		CacheReadInputTokens:     u.CacheReadTokens,
		OutputTokens:             u.OutputTokens,
	}
}

func encodeAnthropic(t *Turn, id, model string, index int) *encoded {
	stop := anthropicStopReason(t)
	msg := antMessage{ID: id, Type: "message", Role: "assistant", Model: model, Content: []any{}, StopReason: &stop, Usage: usageOf(t.Usage)}
	var frames [][]byte

	start := msg
	start.Content = []any{}
	start.StopReason = nil
	start.Usage.OutputTokens = min(t.Usage.OutputTokens, 1)
	frames = append(frames, sseFrame("message_start", mustJSON(struct {
		Type    string     `json:"type"`
		Message antMessage `json:"message"`
	}{"message_start", start})))
	for range t.Pings {
		frames = append(frames, pingFrame(Anthropic))
	}

	block := 0
	startFrame := func(cb any) {
		frames = append(frames, sseFrame("content_block_start", mustJSON(struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock any    `json:"content_block"`
		}{"content_block_start", block, cb})))
	}
	delta := func(d any) {
		frames = append(frames, sseFrame("content_block_delta", mustJSON(struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
			Delta any    `json:"delta"`
		}{"content_block_delta", block, d})))
	}
	stopFrame := func() {
		frames = append(frames, sseFrame("content_block_stop", mustJSON(struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
		}{"content_block_stop", block})))
		block++
	}
	type textDelta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type thinkingDelta struct {
		Type     string `json:"type"`
		Thinking string `json:"thinking"`
	}
	type signatureDelta struct {
		Type      string `json:"type"`
		Signature string `json:"signature"`
	}
	type jsonDelta struct {
		Type        string `json:"type"`
		PartialJSON string `json:"partial_json"`
	}

	calls := 0
	for _, p := range t.Parts {
		switch p := p.(type) {
		case llm.Text:
			msg.Content = append(msg.Content, antTextBlock{"text", p.Text})
			startFrame(antTextBlock{"text", ""})
			for _, c := range chunks(p.Text, t.Chunk) {
				delta(textDelta{"text_delta", c})
			}
			stopFrame()
		case llm.Thinking:
			if p.Redacted != "" {
				msg.Content = append(msg.Content, antRedactedBlock{"redacted_thinking", p.Redacted})
				startFrame(antRedactedBlock{"redacted_thinking", p.Redacted})
				stopFrame()
				continue
			}
			msg.Content = append(msg.Content, antThinkingBlock{"thinking", p.Text, p.Signature})
			startFrame(antThinkingBlock{"thinking", "", ""})
			for _, c := range chunks(p.Text, t.Chunk) {
				delta(thinkingDelta{"thinking_delta", c})
			}
			if p.Signature != "" {
				delta(signatureDelta{"signature_delta", p.Signature})
			}
			stopFrame()
		case llm.ToolCall:
			cid := callID(Anthropic, p, index, calls)
			calls++
			msg.Content = append(msg.Content, antToolUseBlock{"tool_use", cid, p.Name, toolInput(p.Arguments)})
			startFrame(antToolUseBlock{"tool_use", cid, p.Name, json.RawMessage("{}")})
			for _, c := range chunks(p.Arguments, t.Chunk) {
				delta(jsonDelta{"input_json_delta", c})
			}
			stopFrame()
		}
	}
	content := len(frames)
	frames = append(frames, sseFrame("message_delta", mustJSON(struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}{Type: "message_delta", Delta: struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}{StopReason: stop}, Usage: struct {
		OutputTokens int64 `json:"output_tokens"`
	}{t.Usage.OutputTokens}})))
	frames = append(frames, sseFrame("message_stop", []byte(`{"type":"message_stop"}`)))

	return &encoded{blocking: mustJSON(msg), frames: frames, full: bytes.Join(frames, nil),
		content: content, flood: encodeFlood(Anthropic, t, id, model, block)}
}

// jsonStringBody is s as it reads between the quotes of a JSON string.
func jsonStringBody(s string) []byte {
	b := mustJSON(s)
	return b[1 : len(b)-1]
}

// --- OpenAI Chat Completions ---

type oaiFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type oaiToolCall struct {
	Index    *int        `json:"index,omitempty"`
	ID       string      `json:"id,omitempty"`
	Type     string      `json:"type,omitempty"`
	Function oaiFunction `json:"function"`
}

type oaiMessage struct {
	Role             string        `json:"role"`
	Content          *string       `json:"content"`
	ReasoningContent *string       `json:"reasoning_content,omitempty"`
	ToolCalls        []oaiToolCall `json:"tool_calls,omitempty"`
	Refusal          *string       `json:"refusal"`
}

type oaiUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func oaiUsageOf(u llm.Usage) oaiUsage {
	var o oaiUsage
	o.PromptTokens = u.InputTokens
	o.CompletionTokens = u.OutputTokens
	o.TotalTokens = u.InputTokens + u.OutputTokens
	o.PromptTokensDetails.CachedTokens = u.CacheReadTokens
	o.CompletionTokensDetails.ReasoningTokens = u.ReasoningTokens
	return o
}

func openAIFinishReason(t *Turn) string {
	if t.StopReason != "" {
		return t.StopReason
	}
	switch t.finish() {
	case llm.FinishLength:
		return "length"
	case llm.FinishToolCalls:
		return "tool_calls"
	case llm.FinishContentFilter:
		return "content_filter"
	}
	return "stop"
}

type oaiDelta struct {
	Role             string        `json:"role,omitempty"`
	Content          *string       `json:"content,omitempty"`
	ReasoningContent *string       `json:"reasoning_content,omitempty"`
	ToolCalls        []oaiToolCall `json:"tool_calls,omitempty"`
}

type oaiChunkChoice struct {
	Index        int      `json:"index"`
	Delta        oaiDelta `json:"delta"`
	FinishReason *string  `json:"finish_reason"`
}

type oaiChunk struct {
	ID      string           `json:"id"`
	Object  string           `json:"object"`
	Created int64            `json:"created"`
	Model   string           `json:"model"`
	Choices []oaiChunkChoice `json:"choices"`
	Usage   *oaiUsage        `json:"usage,omitempty"`
}

func encodeOpenAI(t *Turn, id, model string, index int) *encoded {
	finish := openAIFinishReason(t)
	var text, reasoning strings.Builder
	var hasText, hasReasoning bool
	var calls []oaiToolCall
	for _, p := range t.Parts {
		switch p := p.(type) {
		case llm.Text:
			text.WriteString(p.Text)
			hasText = true
		case llm.Thinking:
			reasoning.WriteString(p.Text)
			hasReasoning = true
		case llm.ToolCall:
			calls = append(calls, oaiToolCall{ID: callID(OpenAI, p, index, len(calls)), Type: "function", Function: oaiFunction{Name: p.Name, Arguments: p.Arguments}})
		}
	}
	msg := oaiMessage{Role: "assistant", ToolCalls: calls}
	if hasText || len(calls) == 0 {
		s := text.String()
		msg.Content = &s
	}
	if hasReasoning {
		s := reasoning.String()
		msg.ReasoningContent = &s
	}
	usage := oaiUsageOf(t.Usage)
	blocking := mustJSON(struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index        int        `json:"index"`
			Message      oaiMessage `json:"message"`
			FinishReason string     `json:"finish_reason"`
			Logprobs     *struct{}  `json:"logprobs"`
		} `json:"choices"`
		Usage oaiUsage `json:"usage"`
	}{ID: id, Object: "chat.completion", Created: created, Model: model, Choices: []struct {
		Index        int        `json:"index"`
		Message      oaiMessage `json:"message"`
		FinishReason string     `json:"finish_reason"`
		Logprobs     *struct{}  `json:"logprobs"`
	}{{Message: msg, FinishReason: finish}}, Usage: usage})

	var frames [][]byte
	chunk := func(d oaiDelta, finish *string) {
		frames = append(frames, sseFrame("", mustJSON(oaiChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
			Choices: []oaiChunkChoice{{Delta: d, FinishReason: finish}}})))
	}
	empty := ""
	chunk(oaiDelta{Role: "assistant", Content: &empty}, nil)
	for range t.Pings {
		frames = append(frames, pingFrame(OpenAI))
	}
	ci := 0
	for _, p := range t.Parts {
		switch p := p.(type) {
		case llm.Text:
			for _, c := range chunks(p.Text, t.Chunk) {
				chunk(oaiDelta{Content: &c}, nil)
			}
		case llm.Thinking:
			for _, c := range chunks(p.Text, t.Chunk) {
				chunk(oaiDelta{ReasoningContent: &c}, nil)
			}
		case llm.ToolCall:
			idx := ci
			pieces := chunks(p.Arguments, t.Chunk)
			first := calls[ci]
			first.Index = &idx
			first.Function.Arguments = pieces[0]
			chunk(oaiDelta{ToolCalls: []oaiToolCall{first}}, nil)
			for _, piece := range pieces[1:] {
				chunk(oaiDelta{ToolCalls: []oaiToolCall{{Index: &idx, Function: oaiFunction{Arguments: piece}}}}, nil)
			}
			ci++
		}
	}
	content := len(frames)
	chunk(oaiDelta{}, &finish)
	done := []byte("data: [DONE]\n\n")
	usageFrame := sseFrame("", mustJSON(oaiChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []oaiChunkChoice{}, Usage: &usage}))
	withUsage := append(append(append([][]byte(nil), frames...), usageFrame), done)
	frames = append(frames, done)
	return &encoded{
		blocking:    blocking,
		frames:      frames,
		full:        bytes.Join(frames, nil),
		framesUsage: withUsage,
		fullUsage:   bytes.Join(withUsage, nil),

		content: content,
		flood:   encodeFlood(OpenAI, t, id, model, ci),
	}
}

// --- errors ---

func defaultError(f Format, status int) APIError {
	if f == Anthropic {
		switch status {
		case 400:
			return APIError{Type: "invalid_request_error", Message: "Invalid request"}
		case 401:
			return APIError{Type: "authentication_error", Message: "invalid x-api-key"}
		case 402:
			return APIError{Type: "billing_error", Message: "Your credit balance is too low"}
		case 403:
			return APIError{Type: "permission_error", Message: "Your API key does not have permission to use the specified resource."}
		case 404:
			return APIError{Type: "not_found_error", Message: "Not found"}
		case 413:
			return APIError{Type: "request_too_large", Message: "Request exceeds the maximum allowed number of bytes."}
		case 429:
			return APIError{Type: "rate_limit_error", Message: "Number of request tokens has exceeded your per-minute rate limit"}
		case 504:
			return APIError{Type: "timeout_error", Message: "Request timed out"}
		case 529:
			return APIError{Type: "overloaded_error", Message: "Overloaded"}
		}
		if status >= 500 {
			return APIError{Type: "api_error", Message: "Internal server error"}
		}
		return APIError{Type: "invalid_request_error", Message: http.StatusText(status)}
	}
	switch status {
	case 401:
		return APIError{Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided."}
	case 403:
		return APIError{Type: "permission_error", Message: "You are not allowed to do this."}
	case 404:
		return APIError{Type: "invalid_request_error", Code: "model_not_found", Message: "The model does not exist or you do not have access to it."}
	case 429:
		return APIError{Type: "requests", Code: "rate_limit_exceeded", Message: "Rate limit reached for requests"}
	case 503:
		return APIError{Type: "server_error", Message: "The engine is currently overloaded, please try again later"}
	}
	if status >= 500 {
		return APIError{Type: "server_error", Message: "The server had an error while processing your request."}
	}
	return APIError{Type: "invalid_request_error", Message: http.StatusText(status)}
}

// statusForType is the HTTP status a vendor uses for an error type, for
// error events played to blocking requests.
func statusForType(typ string) int {
	switch typ {
	case "invalid_request_error":
		return 400
	case "authentication_error":
		return 401
	case "billing_error":
		return 402
	case "permission_error":
		return 403
	case "not_found_error":
		return 404
	case "request_too_large":
		return 413
	case "rate_limit_error", "insufficient_quota", "requests", "tokens":
		return 429
	case "timeout_error":
		return 504
	case "overloaded_error":
		return 529
	}
	return 500
}

func filled(f Format, status int, e *APIError) APIError {
	d := defaultError(f, status)
	if e == nil {
		return d
	}
	out := *e
	if out.Type == "" {
		out.Type = d.Type
	}
	if out.Message == "" {
		out.Message = d.Message
	}
	return out
}

func anthropicErrorObject(e APIError) any {
	type details struct {
		ErrorCode string `json:"error_code"`
	}
	type obj struct {
		Type    string   `json:"type"`
		Message string   `json:"message"`
		Details *details `json:"details,omitempty"`
	}
	o := obj{Type: e.Type, Message: e.Message}
	if e.Code != "" {
		o.Details = &details{e.Code}
	}
	return struct {
		Type  string `json:"type"`
		Error obj    `json:"error"`
	}{"error", o}
}

func openAIErrorObject(e APIError) any {
	var code *string
	if e.Code != "" {
		code = &e.Code
	}
	return struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}{Error: struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}{Message: e.Message, Type: e.Type, Code: code}}
}

func errorBody(f Format, status int, e *APIError) []byte {
	full := filled(f, status, e)
	if f == Anthropic {
		return mustJSON(anthropicErrorObject(full))
	}
	return mustJSON(openAIErrorObject(full))
}

func errorFrame(f Format, e *APIError) []byte {
	full := filled(f, statusForType(e.Type), e)
	if f == Anthropic {
		return sseFrame("error", mustJSON(anthropicErrorObject(full)))
	}
	return sseFrame("", mustJSON(openAIErrorObject(full)))
}
