package llm

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Accumulator folds stream events into a Response. The zero value is ready;
// feed it with Add and read the answer with Response at any point (reading
// does not consume it). It is not safe for concurrent use.
//
// It is where broken streams are made safe, whatever the provider did:
//
//   - calls are kept per slot index, so interleaved deltas of parallel calls
//     land in the right call; a start that reuses an open index with a new
//     id opens a second call;
//   - names and arguments are concatenated across chunks; arguments may
//     arrive with the start;
//   - empty arguments become {}; several JSON objects glued together are
//     reduced when they are copies or empty placeholders ({}{"a":1}), and
//     otherwise mark the call Malformed: arguments are never guessed;
//   - usage reports replace each other count by count (they are
//     cumulative); a count a report carries replaces the one before, zero
//     included, and one it leaves out stays (UsageReport.Reported);
//   - without a Finish the response is Truncated and every call Incomplete;
//     with a length finish, calls the provider had not closed are Incomplete.
//
// Memory grows with the content received, never with index values.
type Accumulator struct {
	parts    []*partBuilder
	open     map[int]*partBuilder // open tool calls by slot index
	usage    Usage
	finished bool
	reason   FinishReason
	start    ResponseStart
}

type partKind uint8

const (
	kindText partKind = iota
	kindThinking
	kindCall
)

type partBuilder struct {
	kind      partKind
	text      strings.Builder // text, thinking text, or call arguments
	signature strings.Builder
	redacted  strings.Builder
	id        string
	name      strings.Builder
	ended     bool
}

// Add folds one event in. Unknown or nil events are ignored.
func (a *Accumulator) Add(e Event) {
	switch e := e.(type) {
	case ResponseStart:
		if e.ID != "" {
			a.start.ID = e.ID
		}
		if e.Model != "" {
			a.start.Model = e.Model
		}
		if e.RequestID != "" {
			a.start.RequestID = e.RequestID
		}
	case TextDelta:
		if e.Text == "" {
			return
		}
		p := a.last(kindText, false)
		p.text.WriteString(e.Text)
	case ThinkingDelta:
		p := a.last(kindThinking, e.Start)
		p.text.WriteString(e.Text)
		p.signature.WriteString(e.Signature)
		p.redacted.WriteString(e.Redacted)
	case ToolCallStart:
		p := a.open[e.Index]
		if p == nil || (p.id != "" && e.ID != "" && p.id != e.ID) {
			p = a.openCall(e.Index)
		}
		if p.id == "" {
			p.id = e.ID
		}
		// A start that repeats the name already held is a repeat, not a
		// second piece of it.
		if e.Name != "" && p.name.String() != e.Name {
			p.name.WriteString(e.Name)
		}
		p.text.WriteString(e.Arguments)
	case ToolCallDelta:
		p := a.open[e.Index]
		if p == nil {
			p = a.openCall(e.Index)
		}
		p.name.WriteString(e.Name)
		p.text.WriteString(e.Arguments)
	case ToolCallEnd:
		if p := a.open[e.Index]; p != nil {
			p.ended = true
			delete(a.open, e.Index)
		}
	case UsageReport:
		a.usage = e.Apply(a.usage)
	case Finish:
		a.finished = true
		if e.Reason != "" {
			a.reason = e.Reason
		}
	}
}

// last returns the last part if it is of kind k and fresh is false, or
// appends a new part of kind k.
func (a *Accumulator) last(k partKind, fresh bool) *partBuilder {
	if n := len(a.parts); n > 0 && !fresh && a.parts[n-1].kind == k {
		return a.parts[n-1]
	}
	p := &partBuilder{kind: k}
	a.parts = append(a.parts, p)
	return p
}

func (a *Accumulator) openCall(index int) *partBuilder {
	if a.open == nil {
		a.open = make(map[int]*partBuilder)
	}
	p := &partBuilder{kind: kindCall}
	a.parts = append(a.parts, p)
	a.open[index] = p
	return p
}

// Finished reports whether a Finish event arrived.
func (a *Accumulator) Finished() bool { return a.finished }

// Response returns the answer so far. Without a Finish it is Truncated.
func (a *Accumulator) Response() Response {
	msg := Message{Role: RoleAssistant, Parts: make([]Part, 0, len(a.parts))}
	for _, p := range a.parts {
		switch p.kind {
		case kindText:
			msg.Parts = append(msg.Parts, Text{Text: p.text.String()})
		case kindThinking:
			msg.Parts = append(msg.Parts, Thinking{
				Text:      p.text.String(),
				Signature: p.signature.String(),
				Redacted:  p.redacted.String(),
			})
		case kindCall:
			args, ok := NormalizeArguments(p.text.String())
			c := ToolCall{ID: p.id, Name: p.name.String(), Arguments: args, Malformed: !ok}
			if !a.finished || (a.reason == FinishLength && !p.ended) {
				c.Incomplete = true
			}
			msg.Parts = append(msg.Parts, c)
		}
	}
	return Response{
		Message:      msg,
		Usage:        a.usage,
		FinishReason: a.reason,
		Truncated:    !a.finished,
		ID:           a.start.ID,
		Model:        a.start.Model,
		RequestID:    a.start.RequestID,
	}
}

// NormalizeArguments returns tool-call arguments as one JSON object and
// true, or the input unchanged and false when that cannot be done without
// guessing. Empty input becomes {}. Several JSON objects glued together are
// reduced when all but one are empty ({}{"a":1}) or they are all equal
// ({"a":1}{"a":1}); anything else is refused.
func NormalizeArguments(raw string) (string, bool) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "{}", true
	}
	if s[0] != '{' {
		return raw, false
	}
	if json.Valid([]byte(s)) { // one object: the usual case, without a decoder
		return s, true
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var values []json.RawMessage
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil || v[0] != '{' {
			return raw, false
		}
		values = append(values, v)
		if strings.TrimSpace(s[dec.InputOffset():]) == "" {
			break
		}
	}
	if len(values) == 1 {
		return s, true
	}
	var kept []json.RawMessage
	for _, v := range values {
		if !isEmptyObject(v) {
			kept = append(kept, v)
		}
	}
	switch len(kept) {
	case 0:
		return "{}", true
	case 1:
		return string(kept[0]), true
	}
	first := compact(kept[0])
	for _, v := range kept[1:] {
		if !bytes.Equal(first, compact(v)) {
			return raw, false
		}
	}
	return string(kept[0]), true
}

func isEmptyObject(v json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(v, &m) == nil && len(m) == 0
}

func compact(v json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return v
	}
	return b.Bytes()
}
