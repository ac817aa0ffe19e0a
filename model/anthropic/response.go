package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/internal/wire"
)

// finishReason maps a stop_reason to loom's finish reason.
func finishReason(s string) llm.FinishReason {
	switch s {
	case "end_turn", "stop_sequence":
		return llm.FinishStop
	case "max_tokens", "model_context_window_exceeded":
		return llm.FinishLength
	case "tool_use":
		return llm.FinishToolCalls
	case "refusal":
		return llm.FinishContentFilter
	case "pause_turn":
		return llm.FinishPause
	case "":
		return ""
	}
	return llm.FinishOther
}

// truncatesBlocks reports whether a stop reason means the last content
// block may have been cut off mid-way.
func truncatesBlocks(s string) bool {
	return s == "max_tokens" || s == "model_context_window_exceeded"
}

type wireUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	// Iterations are the sampling steps of a request the server compacted
	// (context management): the top-level counts are the last step's only,
	// while every step is billed.
	Iterations []wireUsage `json:"iterations"`
}

// billed returns u with its counts replaced by their sums over
// u.Iterations, when there are any: what the request consumed in all.
func (u *wireUsage) billed() *wireUsage {
	if len(u.Iterations) == 0 {
		return u
	}
	var in, out, cw, cr int64
	for _, it := range u.Iterations {
		for _, c := range []struct {
			dst *int64
			src *int64
		}{{&in, it.InputTokens}, {&out, it.OutputTokens}, {&cw, it.CacheCreationInputTokens}, {&cr, it.CacheReadInputTokens}} {
			if c.src != nil {
				*c.dst += *c.src
			}
		}
	}
	return &wireUsage{InputTokens: &in, OutputTokens: &out, CacheCreationInputTokens: &cw, CacheReadInputTokens: &cr}
}

// usageState holds the last value of each count a message's usage reports
// have carried (they are cumulative; later ones replace earlier ones), so
// that llm.Usage.InputTokens, which Anthropic splits in three, is always
// their sum.
type usageState struct {
	input, output, cacheWrite, cacheRead int64
	has                                  llm.UsageFields // of UsageInput (input_tokens), UsageOutput, UsageCacheWrite, UsageCacheRead
}

// add takes the counts u carries and reports whether it carried any.
func (s *usageState) add(u *wireUsage) bool {
	if u == nil {
		return false
	}
	u = u.billed()
	any := false
	take := func(dst *int64, src *int64, f llm.UsageFields) {
		if src != nil {
			*dst = *src
			s.has |= f
			any = true
		}
	}
	take(&s.input, u.InputTokens, llm.UsageInput)
	take(&s.output, u.OutputTokens, llm.UsageOutput)
	take(&s.cacheWrite, u.CacheCreationInputTokens, llm.UsageCacheWrite)
	take(&s.cacheRead, u.CacheReadInputTokens, llm.UsageCacheRead)
	return any
}

// report is the usage so far in llm.Usage's convention: InputTokens counts
// the cached input too, which Anthropic's input_tokens leaves out. Every
// count known so far is reported, zeros included.
func (s *usageState) report() llm.UsageReport {
	r := llm.UsageReport{Usage: llm.Usage{
		InputTokens:      s.input + s.cacheRead + s.cacheWrite,
		OutputTokens:     s.output,
		CacheReadTokens:  s.cacheRead,
		CacheWriteTokens: s.cacheWrite,
	}, Reported: s.has}
	if s.has&(llm.UsageCacheRead|llm.UsageCacheWrite) != 0 {
		r.Reported |= llm.UsageInput
	}
	return r
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type wireMessage struct {
	ID         string      `json:"id"`
	Type       string      `json:"type"`
	Role       string      `json:"role"`
	Model      string      `json:"model"`
	Content    []wireBlock `json:"content"`
	StopReason *string     `json:"stop_reason"`
	Usage      *wireUsage  `json:"usage"`
}

// decodeMessage turns a blocking response body into a Response. It folds
// the same events a stream would produce, so a blocking call and a
// streaming call of the same answer give the same Response.
func decodeMessage(op string, resp *http.Response, body []byte, limits wire.AnswerLimits) (llm.Response, error) {
	var msg wireMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		return llm.Response{}, wire.InvalidResponse(op, resp, body, err)
	}
	if msg.Type != "message" || msg.StopReason == nil {
		return llm.Response{}, wire.InvalidResponse(op, resp, body, fmt.Errorf("want a message with a stop_reason, got type %q", msg.Type))
	}
	// The answer's size is measured before any of it is folded.
	meter := wire.Meter{Limits: limits, Op: op, RequestID: wire.RequestID(resp.Header)}
	for _, b := range msg.Content {
		if err := meter.Part(blockPart(b.Type)); err != nil {
			return llm.Response{}, err
		}
		if err := meter.Bytes(len(b.Text) + len(b.Thinking) + len(b.Signature) + len(b.Data) + len(b.ID) + len(b.Name) + len(b.Input)); err != nil {
			return llm.Response{}, err
		}
	}
	var acc llm.Accumulator
	acc.Add(llm.ResponseStart{ID: msg.ID, Model: msg.Model, RequestID: wire.RequestID(resp.Header)})
	stop := *msg.StopReason
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			acc.Add(llm.TextDelta{Text: b.Text})
		case "thinking":
			acc.Add(llm.ThinkingDelta{Start: true, Text: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			acc.Add(llm.ThinkingDelta{Start: true, Redacted: b.Data})
		case "tool_use":
			acc.Add(llm.ToolCallStart{Index: i, ID: b.ID, Name: b.Name, Arguments: inputArguments(b.Input)})
			if !(truncatesBlocks(stop) && i == len(msg.Content)-1) {
				acc.Add(llm.ToolCallEnd{Index: i})
			}
		}
	}
	var us usageState
	if us.add(msg.Usage) {
		acc.Add(us.report())
	}
	acc.Add(llm.Finish{Reason: finishReason(stop)})
	out := acc.Response()
	out.Raw = body
	return out, nil
}

// inputArguments returns a tool_use input as call arguments: an object's
// JSON text as sent, {} for an empty or absent input, the text of a JSON
// string (some compatible proxies send the input JSON-encoded in a string),
// and any other value's JSON text. Arguments that are not one object are
// then marked Malformed by the Accumulator, never guessed.
func inputArguments(in json.RawMessage) string {
	in = bytes.TrimSpace(in)
	if len(in) == 0 || string(in) == "null" {
		return "{}"
	}
	if in[0] == '"' {
		var s string
		if json.Unmarshal(in, &s) == nil {
			return s
		}
	}
	return string(in)
}

// streamEvent is the union of the data of every stream event type; one
// value is reused for every event of a stream.
type streamEvent struct {
	Type         string       `json:"type"`
	Index        *int         `json:"index"`
	Message      *wireMessage `json:"message"`
	ContentBlock *wireBlock   `json:"content_block"`
	Delta        *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		Thinking    string  `json:"thinking"`
		Signature   string  `json:"signature"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *wireUsage `json:"usage"`
}

// blockPart is the kind of part a content block of type typ is, as an
// answer's size is measured.
func blockPart(typ string) wire.PartKind {
	switch typ {
	case "text":
		return wire.PartText
	case "thinking", "redacted_thinking":
		return wire.PartThinking
	case "tool_use":
		return wire.PartCall
	}
	return wire.PartOther
}

type blockKind uint8

const (
	blockOther blockKind = iota // a type loom does not use (server tools, future types)
	blockText
	blockThinking
	blockRedacted
	blockToolUse
)

type blockState struct {
	kind       blockKind
	open       bool
	startInput string // tool_use input given with the start, if not {}
	gotInput   bool   // input_json_delta pieces arrived
	unopened   bool   // a thinking block whose Start event is not sent yet
}

// parser turns Anthropic stream events into llm events. It checks the
// protocol as the official SDK's accumulator does: blocks start at the next
// index with no gaps, deltas and stops name an open block, nothing comes
// before message_start. It is not safe for concurrent use.
type parser struct {
	op        string
	header    http.Header
	started   bool
	done      bool // message_stop arrived
	blocks    []blockState
	pending   int    // index of a stopped tool_use whose end is withheld, -1 if none
	stop      string // the stop_reason, once known
	sawReason bool
	ev        streamEvent
	events    int
	usage     usageState
	meter     wire.Meter // the answer's size; it bounds the blocks too
}

func newParser(op string, h http.Header, limits wire.AnswerLimits) *parser {
	return &parser{op: op, header: h, pending: -1, meter: wire.Meter{Limits: limits, Op: op, RequestID: wire.RequestID(h)}}
}

func (p *parser) protocolError(format string, args ...any) *model.Error {
	return &model.Error{
		Kind:    model.KindInvalidResponse,
		Op:      p.op,
		Message: fmt.Sprintf("stream event %d: ", p.events) + fmt.Sprintf(format, args...),
	}
}

// add handles one event (its SSE type and data) and appends the llm events
// it yields to out. A non-nil error ends the stream: a protocol error, or
// the provider's error event.
func (p *parser) add(typ string, data []byte, out []llm.Event) ([]llm.Event, error) {
	p.events++
	if p.done {
		return out, nil // nothing after message_stop counts
	}
	if typ == "ping" {
		return out, nil
	}
	if typ == "error" {
		return out, wire.StreamError(p.op, p.header, data)
	}
	if typ == "content_block_delta" && p.started {
		// The hot path: most events of a stream are deltas of one shape.
		if index, dtype, payload, ok := fastDelta(data); ok {
			return p.delta(&index, dtype, payload, out)
		}
	}
	ev := &p.ev
	*ev = streamEvent{}
	if err := json.Unmarshal(data, ev); err != nil {
		e := p.protocolError("%s data is not JSON: %s", typ, wire.Snippet(data))
		e.Err = err
		e.Raw = bytes.Clone(data[:min(len(data), wire.RawKeep)])
		return out, e
	}
	if typ == "" {
		typ = ev.Type // a stream without event: lines still names each event in its data
		switch typ {
		case "error":
			return out, wire.StreamError(p.op, p.header, data)
		case "ping":
			return out, nil
		}
	}
	if typ != "message_start" && !p.started {
		switch typ {
		case "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop":
			return out, p.protocolError("%s before message_start", typ)
		}
	}
	switch typ {
	case "message_start":
		if p.started {
			return out, p.protocolError("a second message_start")
		}
		p.started = true
		if ev.Message == nil {
			return out, p.protocolError("message_start without a message")
		}
		out = append(out, llm.ResponseStart{ID: ev.Message.ID, Model: ev.Message.Model, RequestID: wire.RequestID(p.header)})
		if p.usage.add(ev.Message.Usage) {
			out = append(out, p.usage.report())
		}
	case "content_block_start":
		if ev.Index == nil || ev.ContentBlock == nil {
			return out, p.protocolError("content_block_start without index or content_block")
		}
		idx := *ev.Index
		if idx != len(p.blocks) {
			return out, p.protocolError("content_block_start for index %d, want %d (blocks must start in order without gaps)", idx, len(p.blocks))
		}
		cb := ev.ContentBlock
		if err := p.meter.Part(blockPart(cb.Type)); err != nil {
			return out, err
		}
		if err := p.meter.Bytes(len(cb.Text) + len(cb.Thinking) + len(cb.Signature) + len(cb.Data) + len(cb.ID) + len(cb.Name) + len(cb.Input)); err != nil {
			return out, err
		}
		out = p.releasePending(out)
		st := blockState{open: true}
		switch cb.Type {
		case "text":
			st.kind = blockText
			if cb.Text != "" {
				out = append(out, llm.TextDelta{Text: cb.Text})
			}
		case "thinking":
			st.kind = blockThinking
			if cb.Thinking == "" && cb.Signature == "" {
				// Sent with the first delta, so that an empty start is not
				// visible output (a retry may still replace the stream).
				st.unopened = true
			} else {
				out = append(out, llm.ThinkingDelta{Start: true, Text: cb.Thinking, Signature: cb.Signature})
			}
		case "redacted_thinking":
			st.kind = blockRedacted
			out = append(out, llm.ThinkingDelta{Start: true, Redacted: cb.Data})
		case "tool_use":
			st.kind = blockToolUse
			if in := bytes.TrimSpace(cb.Input); len(in) > 0 && string(in) != "{}" && string(in) != "null" {
				st.startInput = string(in)
			}
			out = append(out, llm.ToolCallStart{Index: idx, ID: cb.ID, Name: cb.Name})
		}
		p.blocks = append(p.blocks, st)
	case "content_block_delta":
		if ev.Delta == nil {
			if _, err := p.openBlock(typ, ev.Index); err != nil {
				return out, err
			}
			return out, p.protocolError("content_block_delta without a delta")
		}
		d := ev.Delta
		payload := d.Text
		switch d.Type {
		case "thinking_delta":
			payload = d.Thinking
		case "signature_delta":
			payload = d.Signature
		case "input_json_delta":
			payload = d.PartialJSON
		}
		return p.delta(ev.Index, d.Type, payload, out)
	case "content_block_stop":
		st, err := p.openBlock(typ, ev.Index)
		if err != nil {
			return out, err
		}
		st.open = false
		if st.unopened {
			out = append(out, llm.ThinkingDelta{Start: true})
			st.unopened = false
		}
		if st.kind == blockToolUse {
			if !st.gotInput && st.startInput != "" {
				out = append(out, llm.ToolCallDelta{Index: *ev.Index, Arguments: st.startInput})
			}
			// The end is withheld until the next block or message_delta:
			// a max_tokens stop means this last call was cut off.
			p.pending = *ev.Index
		}
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != nil {
			p.stop, p.sawReason = *ev.Delta.StopReason, true
		}
		if !(truncatesBlocks(p.stop) && p.pending == len(p.blocks)-1) {
			out = p.releasePending(out)
		}
		if p.usage.add(ev.Usage) {
			// Cumulative: a count it reports as 0 replaces the one
			// message_start gave (the blocking body says the same).
			out = append(out, p.usage.report())
		}
	case "message_stop":
		if !p.sawReason {
			return out, p.protocolError("message_stop without a stop_reason (no message_delta)")
		}
		for i, st := range p.blocks {
			if st.open {
				return out, p.protocolError("message_stop while block %d is open", i)
			}
		}
		if !truncatesBlocks(p.stop) {
			out = p.releasePending(out)
		}
		p.done = true
		out = append(out, llm.Finish{Reason: finishReason(p.stop)})
	default:
		// Event types added later are ignored, as the API asks.
	}
	return out, nil
}

// delta handles a content_block_delta for block index of type dtype, whose
// text, thinking, signature or partial JSON is payload.
func (p *parser) delta(index *int, dtype, payload string, out []llm.Event) ([]llm.Event, error) {
	st, err := p.openBlock("content_block_delta", index)
	if err != nil {
		return out, err
	}
	if st.kind != blockOther {
		if err := p.meter.Bytes(len(payload)); err != nil {
			return out, err
		}
	}
	switch dtype {
	case "text_delta":
		if st.kind != blockText {
			return out, p.protocolError("text_delta for a block that is not text")
		}
		out = append(out, llm.TextDelta{Text: payload})
	case "thinking_delta":
		if st.kind != blockThinking {
			return out, p.protocolError("thinking_delta for a block that is not thinking")
		}
		out = append(out, llm.ThinkingDelta{Start: st.unopened, Text: payload})
		st.unopened = false
	case "signature_delta":
		if st.kind != blockThinking {
			return out, p.protocolError("signature_delta for a block that is not thinking")
		}
		out = append(out, llm.ThinkingDelta{Start: st.unopened, Signature: payload})
		st.unopened = false
	case "input_json_delta":
		if st.kind != blockToolUse {
			if st.kind == blockOther {
				break // input of a server tool
			}
			return out, p.protocolError("input_json_delta for a block that is not tool_use")
		}
		if payload != "" {
			st.gotInput = true
			out = append(out, llm.ToolCallDelta{Index: *index, Arguments: payload})
		}
	default:
		// citations_delta and delta types added later carry nothing loom
		// keeps.
	}
	return out, nil
}

func (p *parser) releasePending(out []llm.Event) []llm.Event {
	if p.pending >= 0 {
		out = append(out, llm.ToolCallEnd{Index: p.pending})
		p.pending = -1
	}
	return out
}

func (p *parser) openBlock(typ string, index *int) (*blockState, error) {
	if index == nil {
		return nil, p.protocolError("%s without an index", typ)
	}
	i := *index
	if i < 0 || i >= len(p.blocks) {
		return nil, p.protocolError("%s for block %d, which never started", typ, i)
	}
	st := &p.blocks[i]
	if !st.open {
		return nil, p.protocolError("%s for block %d, which already stopped", typ, i)
	}
	return st, nil
}

// end reports the error for a stream whose body ended after the events so
// far: nil after message_stop, else a truncated-stream error.
func (p *parser) end() error {
	if p.done {
		return nil
	}
	where := "before message_start"
	if p.started {
		where = fmt.Sprintf("after %d events, before message_stop", p.events)
	}
	return &model.Error{
		Kind:      model.KindTruncatedStream,
		Op:        p.op,
		Message:   "the stream ended " + where + "; the answer is incomplete",
		RequestID: wire.RequestID(p.header),
	}
}
