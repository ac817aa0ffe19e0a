package wire

import (
	"fmt"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

// Defaults of the bounds on one answer. They are far above what any model
// answers (the largest outputs are a few hundred thousand tokens, about a
// megabyte, and a few dozen parallel calls) and far below what would
// trouble the memory of the process that holds the answer, its history and
// the next request built from it.
const (
	// DefaultMaxAnswerBytes bounds the content of one answer: its text,
	// thinking (signatures and redacted thinking included) and tool-call
	// names and arguments, added up.
	DefaultMaxAnswerBytes = 16 << 20
	// DefaultMaxParts bounds the parts of one answer: text and thinking
	// parts, content blocks and tool calls.
	DefaultMaxParts = 8192
	// DefaultMaxToolCalls bounds the tool calls of one answer.
	DefaultMaxToolCalls = 4096
)

// AnswerLimits are the bounds on one answer; a zero field is no bound.
type AnswerLimits struct {
	Bytes int64
	Parts int
	Calls int
}

// ResolveAnswerLimits resolves an adapter's settings: 0 is the default, a
// negative value disables the bound.
func ResolveAnswerLimits(bytes int64, parts, calls int) AnswerLimits {
	l := AnswerLimits{Bytes: bytes, Parts: parts, Calls: calls}
	switch {
	case bytes == 0:
		l.Bytes = DefaultMaxAnswerBytes
	case bytes < 0:
		l.Bytes = 0
	}
	switch {
	case parts == 0:
		l.Parts = DefaultMaxParts
	case parts < 0:
		l.Parts = 0
	}
	switch {
	case calls == 0:
		l.Calls = DefaultMaxToolCalls
	case calls < 0:
		l.Calls = 0
	}
	return l
}

// PartKind is the kind of a part, as a Meter counts parts.
type PartKind uint8

const (
	partNone PartKind = iota
	PartText
	PartThinking
	PartCall
	PartOther // a content block loom does not keep (server tools, future types)
)

// Meter measures one answer against its limits as an adapter produces it,
// and returns a KindAnswerTooLarge *model.Error at the first excess. It
// counts parts the way llm.Accumulator makes them: text after text, or
// thinking after thinking, continues a part; anything else starts one.
// The zero Meter has no limits. A Meter belongs to one answer and is not
// safe for concurrent use.
type Meter struct {
	Limits    AnswerLimits
	Op        string
	RequestID string

	bytes int64
	parts int
	calls int
	last  PartKind
}

// Part counts a new part of kind k (a content block that starts).
func (m *Meter) Part(k PartKind) error {
	m.parts++
	m.last = k
	if k == PartCall {
		m.calls++
		if m.Limits.Calls > 0 && m.calls > m.Limits.Calls {
			return m.tooLarge(fmt.Sprintf("more than %d tool calls", m.Limits.Calls), "MaxToolCalls")
		}
	}
	if m.Limits.Parts > 0 && m.parts > m.Limits.Parts {
		return m.tooLarge(fmt.Sprintf("more than %d parts", m.Limits.Parts), "MaxParts")
	}
	return nil
}

// Content counts n bytes of content of kind k, starting a part when the
// last one is of another kind.
func (m *Meter) Content(k PartKind, n int) error {
	if m.last != k {
		if err := m.Part(k); err != nil {
			return err
		}
	}
	return m.Bytes(n)
}

// Bytes counts n bytes of content of the current part (a call's name and
// arguments, a signature).
func (m *Meter) Bytes(n int) error {
	m.bytes += int64(n)
	if m.Limits.Bytes > 0 && m.bytes > m.Limits.Bytes {
		return m.tooLarge(fmt.Sprintf("more than %d bytes of content", m.Limits.Bytes), "MaxAnswerBytes")
	}
	return nil
}

// CheckCalls returns the error for an answer of n tool calls when n is
// past the bound, before they are built; it counts nothing.
func (m *Meter) CheckCalls(n int) error {
	if m.Limits.Calls > 0 && n > m.Limits.Calls {
		return m.tooLarge(fmt.Sprintf("more than %d tool calls", m.Limits.Calls), "MaxToolCalls")
	}
	return nil
}

// Response measures a whole answer, part by part.
func (m *Meter) Response(r llm.Response) error {
	for _, p := range r.Message.Parts {
		var err error
		switch p := p.(type) {
		case llm.Text:
			if err = m.Part(PartText); err == nil {
				err = m.Bytes(len(p.Text))
			}
		case llm.Thinking:
			if err = m.Part(PartThinking); err == nil {
				err = m.Bytes(len(p.Text) + len(p.Signature) + len(p.Redacted))
			}
		case llm.ToolCall:
			if err = m.Part(PartCall); err == nil {
				err = m.Bytes(len(p.ID) + len(p.Name) + len(p.Arguments))
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (m *Meter) tooLarge(what, field string) *model.Error {
	return &model.Error{Kind: model.KindAnswerTooLarge, Op: m.Op, RequestID: m.RequestID,
		Message: "the answer holds " + what + " (the adapter's Config." + field + "); none of it is used"}
}
