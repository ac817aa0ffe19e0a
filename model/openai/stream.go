package openai

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/internal/sse"
	"github.com/loomkit/loom/model/internal/wire"
)

// A chat.completion.chunk. The id and model repeat in every chunk; they
// are decoded (strings allocated) only until the first chunk carried them.
type chunk struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	chunkBody
}

type chunkBody struct {
	Choices []chunkChoice   `json:"choices"`
	Usage   *usage          `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type chunkChoice struct {
	Index        int          `json:"index"`
	Delta        replyMessage `json:"delta"`
	FinishReason *string      `json:"finish_reason"`
}

// parser turns the SSE events of one Chat Completions stream into llm
// events. It is pure: no IO, so it can be fuzzed on its own.
type parser struct {
	op        string
	header    http.Header
	requestID string

	id       string // the response's id, once a chunk carried it
	started  bool   // ResponseStart sent
	answered bool   // a chunk carried choice 0
	finished bool   // a finish_reason arrived
	reason   llm.FinishReason
	done     bool           // [DONE] arrived
	open     map[int]string // open call slots: index -> provider id
	order    []int          // open slots in the order they opened
	meter    wire.Meter     // the answer's size; it bounds the calls, so memory grows with the calls seen, never with index values
}

// newParser is small enough to be inlined, so that a parser that does not
// escape its caller is not allocated; the caller sets meter.RequestID.
func newParser(op string, h http.Header, limits wire.AnswerLimits) *parser {
	return &parser{op: op, header: h, requestID: wire.RequestID(h), meter: wire.Meter{Limits: limits, Op: op}}
}

var doneMarker = []byte("[DONE]")

// feed handles one SSE event, appending what it yields to out.
func (p *parser) feed(ev sse.Event, out []llm.Event) ([]llm.Event, error) {
	if p.done {
		return out, nil
	}
	switch ev.Type {
	case "", "message":
	case "error":
		return out, wire.StreamError(p.op, p.header, ev.Data)
	default:
		// Event types this API does not define: ignore them.
		return out, nil
	}
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return out, nil
	}
	if bytes.Equal(data, doneMarker) {
		if !p.answered {
			return out, p.noChoice("[DONE]")
		}
		p.done = true
		return append(out, llm.Finish{Reason: p.reason}), nil
	}
	if data[0] != '{' {
		return out, p.invalid(data, nil)
	}
	var c chunk
	if !fastChunk(data, &c, p.started) {
		var err error
		if c, err = slowChunk(data, p.started); err != nil {
			return out, p.invalid(data, err)
		}
	}
	if len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) {
		return out, wire.StreamError(p.op, p.header, data)
	}
	if !p.started && (c.ID != "" || c.Model != "" || p.requestID != "") {
		p.started = true
		p.id = c.ID
		out = append(out, llm.ResponseStart{ID: c.ID, Model: c.Model, RequestID: p.requestID})
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // only one choice is ever asked for
		}
		p.answered = true
		var err error
		if out, err = p.delta(ch, out); err != nil {
			return out, err
		}
	}
	if u, reported := c.Usage.toLLM(); !u.IsZero() {
		// A usage object of zeros says nothing (some servers send one in
		// every chunk); otherwise its counts replace earlier ones.
		out = append(out, llm.UsageReport{Usage: u, Reported: reported})
	}
	return out, nil
}

// legacySlot is the call slot of a legacy function_call, which has no
// index of its own; tool_calls indexes are never negative here.
const legacySlot = -1

// slowChunk decodes a chunk with encoding/json, for what the fast path
// leaves to it; with bodyOnly, id and model are not decoded.
func slowChunk(data []byte, bodyOnly bool) (chunk, error) {
	var c chunk
	if bodyOnly {
		return c, json.Unmarshal(data, &c.chunkBody)
	}
	return c, json.Unmarshal(data, &c)
}

func (p *parser) delta(ch *chunkChoice, out []llm.Event) ([]llm.Event, error) {
	d := &ch.Delta
	if r := d.ReasoningContent + d.Reasoning + d.Content.Thinking; r != "" {
		if err := p.meter.Content(wire.PartThinking, len(r)); err != nil {
			return out, err
		}
		out = append(out, llm.ThinkingDelta{Text: r})
	}
	if t := d.Content.Text + d.Refusal; t != "" {
		if err := p.meter.Content(wire.PartText, len(t)); err != nil {
			return out, err
		}
		out = append(out, llm.TextDelta{Text: t})
	}
	if fc := d.FunctionCall; fc != nil && (fc.Name != "" || fc.Arguments != "") {
		// The legacy single call: its first fragment opens it, with an
		// id made from the response's (as for a blocking answer).
		id := ""
		if _, open := p.open[legacySlot]; !open {
			id = legacyCallID(p.id)
		}
		var err error
		if out, err = p.call(legacySlot, id, fc, out); err != nil {
			return out, err
		}
	}
	for i := range d.ToolCalls {
		tc := &d.ToolCalls[i]
		// A missing index reads as 0; a call with a new id on an open
		// slot still opens a call of its own. Some servers send -1.
		var err error
		if out, err = p.call(max(tc.Index, 0), tc.ID, &tc.Function, out); err != nil {
			return out, err
		}
	}
	if ch.FinishReason != nil && *ch.FinishReason != "" {
		p.finished = true
		p.reason = finishReason(*ch.FinishReason)
		if p.reason != llm.FinishLength {
			// The calls are whole: say so. After a length finish they
			// stay open, so the accumulator marks them Incomplete.
			for _, idx := range p.order {
				out = append(out, llm.ToolCallEnd{Index: idx})
			}
		}
		p.open, p.order = nil, nil
	}
	return out, nil
}

// call handles one fragment of the call in slot idx, whose id (when the
// fragment has one) is id: the first fragment opens the call, one with a
// new id opens another, the others continue it.
func (p *parser) call(idx int, id string, fn *replyFunction, out []llm.Event) ([]llm.Event, error) {
	openID, isOpen := p.open[idx]
	switch {
	case !isOpen || (id != "" && openID != "" && id != openID):
		if err := p.meter.Part(wire.PartCall); err != nil {
			return out, err
		}
		if err := p.meter.Bytes(len(id) + len(fn.Name) + len(fn.Arguments)); err != nil {
			return out, err
		}
		if p.open == nil {
			p.open = make(map[int]string)
		}
		if !isOpen {
			p.order = append(p.order, idx)
		}
		p.open[idx] = id
		out = append(out, llm.ToolCallStart{Index: idx, ID: id, Name: fn.Name, Arguments: fn.Arguments})
	case id != "":
		// The id again (some servers repeat it, with the name, in
		// every fragment): a start the accumulator merges.
		if err := p.meter.Bytes(len(fn.Name) + len(fn.Arguments)); err != nil {
			return out, err
		}
		if openID == "" {
			p.open[idx] = id
		}
		out = append(out, llm.ToolCallStart{Index: idx, ID: id, Name: fn.Name, Arguments: fn.Arguments})
	default:
		if fn.Name != "" || fn.Arguments != "" {
			if err := p.meter.Bytes(len(fn.Name) + len(fn.Arguments)); err != nil {
				return out, err
			}
			out = append(out, llm.ToolCallDelta{Index: idx, Name: fn.Name, Arguments: fn.Arguments})
		}
	}
	return out, nil
}

// end is called when the body ended cleanly. A stream that sent [DONE] is
// complete. One that sent a finish_reason but no [DONE] is accepted as
// complete too: every content and tool-call fragment precedes the
// finish_reason, so the answer is whole (only a trailing usage report may
// be missing). One that sent neither was cut: KindTruncatedStream.
func (p *parser) end(out []llm.Event) ([]llm.Event, error) {
	if p.done {
		return out, nil
	}
	if p.finished {
		// A finish_reason is a delta of choice 0, so the answer came.
		p.done = true
		return append(out, llm.Finish{Reason: p.reason}), nil
	}
	return out, &model.Error{Kind: model.KindTruncatedStream, Op: p.op, RequestID: p.requestID,
		Message: "the stream ended before [DONE] and without a finish_reason; the answer is incomplete"}
}

func (p *parser) invalid(data []byte, cause error) error {
	msg := "a stream chunk is not a JSON object: "
	if data[0] == '{' {
		msg = "a stream chunk does not match the API: "
	}
	return &model.Error{Kind: model.KindInvalidResponse, Op: p.op, RequestID: p.requestID,
		Message: msg + wire.Snippet(data), Raw: bytes.Clone(data[:min(len(data), wire.RawKeep)]), Err: cause}
}

// noChoice is the error for a stream that ended (at what) without ever
// carrying choice 0: it delivered no answer, which a blocking body without
// a choice is refused for too.
func (p *parser) noChoice(at string) error {
	return &model.Error{Kind: model.KindInvalidResponse, Op: p.op, RequestID: p.requestID,
		Message: "the stream reached " + at + " without a choice with index 0: it holds no answer"}
}
