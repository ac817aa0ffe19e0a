package openai

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// A fast path for decoding the two bodies every turn receives (a blocking
// chat.completion and a stream's chat.completion.chunk) into the same
// structs encoding/json fills, without reflection.
//
// It handles the common, well-formed case and gives up (ok false) on
// anything else: a syntax error, a value of an unexpected type, a number
// that is not a plain integer, a key with escapes, a key that only matches
// a field case-insensitively, a duplicate key, deep nesting. The caller
// then decodes with encoding/json, which either succeeds where the fast
// path was merely cautious or returns its usual error, so the outcome is
// always exactly what json.Unmarshal gives; FuzzFastDecodeMatchesJSON
// checks that.

// maxSkipDepth bounds the nesting of values the fast path skips; deeper
// documents go to encoding/json.
const maxSkipDepth = 64

type jsonScanner struct {
	data []byte
	pos  int
}

func (s *jsonScanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, 0 at the end.
func (s *jsonScanner) peek() byte {
	s.ws()
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *jsonScanner) consume(c byte) bool {
	if s.peek() == c {
		s.pos++
		return true
	}
	return false
}

// literal consumes lit (true, false or null) at the current position.
func (s *jsonScanner) literal(lit string) bool {
	if bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		s.pos += len(lit)
		return true
	}
	return false
}

// null consumes a null, when the next value is one.
func (s *jsonScanner) null() bool {
	return s.peek() == 'n' && s.literal("null")
}

// rawString scans a string at the current position (after whitespace) and
// returns its bytes between the quotes. escaped reports a backslash,
// plain that every byte is printable ASCII without escapes. Control
// bytes and invalid escapes fail, as in the JSON grammar.
func (s *jsonScanner) rawString() (raw []byte, escaped, plain, ok bool) {
	if s.peek() != '"' {
		return nil, false, false, false
	}
	s.pos++
	start := s.pos
	plain = true
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			raw = s.data[start:s.pos]
			s.pos++
			return raw, escaped, plain, true
		case c == '\\':
			escaped, plain = true, false
			if s.pos+1 >= len(s.data) {
				return nil, false, false, false
			}
			switch s.data[s.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos += 2
			case 'u':
				if s.pos+6 > len(s.data) || hex4(s.data[s.pos+2:s.pos+6]) < 0 {
					return nil, false, false, false
				}
				s.pos += 6
			default:
				return nil, false, false, false
			}
		case c < ' ':
			return nil, false, false, false
		default:
			if c >= utf8.RuneSelf {
				plain = false
			}
			s.pos++
		}
	}
	return nil, false, false, false
}

// str decodes a string value as encoding/json does: escapes resolved,
// invalid UTF-8 and lone surrogates replaced by U+FFFD.
func (s *jsonScanner) str() (string, bool) {
	raw, escaped, plain, ok := s.rawString()
	if !ok {
		return "", false
	}
	if plain || (!escaped && utf8.Valid(raw)) {
		return string(raw), true
	}
	return unquote(raw), true
}

// optStr decodes a string, leaving *dst alone for null (what
// encoding/json does with null for a string).
func (s *jsonScanner) optStr(dst *string) bool {
	if s.null() {
		return true
	}
	v, ok := s.str()
	*dst = v
	return ok
}

// ptrStr decodes a string or null into a *string.
func (s *jsonScanner) ptrStr(dst **string) bool {
	if s.null() {
		*dst = nil
		return true
	}
	v, ok := s.str()
	*dst = &v
	return ok
}

// integer decodes a plain integer (no fraction or exponent, which
// encoding/json refuses for integer fields) of the given bit size; null
// leaves *dst alone.
func (s *jsonScanner) integer(dst *int64, bits int) bool {
	if s.null() {
		return true
	}
	start := s.pos
	if s.pos < len(s.data) && s.data[s.pos] == '-' {
		s.pos++
	}
	digits := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	n := s.pos - digits
	if n == 0 || n > 1 && s.data[digits] == '0' || n > 18 {
		return false // not a number, a leading zero, or maybe too large
	}
	v, err := strconv.ParseInt(string(s.data[start:s.pos]), 10, bits)
	if err != nil {
		return false
	}
	*dst = v
	return true
}

func (s *jsonScanner) intField(dst *int) bool {
	var v int64
	if !s.integer(&v, strconv.IntSize) {
		return false
	}
	if v != 0 {
		*dst = int(v)
	}
	return true
}

// skip scans any value, checking its syntax.
func (s *jsonScanner) skip(depth int) bool {
	if depth > maxSkipDepth {
		return false
	}
	switch s.peek() {
	case '"':
		_, _, _, ok := s.rawString()
		return ok
	case '{':
		s.pos++
		if s.consume('}') {
			return true
		}
		for {
			if _, _, _, ok := s.rawString(); !ok || !s.consume(':') || !s.skip(depth+1) {
				return false
			}
			if s.consume(',') {
				continue
			}
			return s.consume('}')
		}
	case '[':
		s.pos++
		if s.consume(']') {
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			if s.consume(',') {
				continue
			}
			return s.consume(']')
		}
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

// number scans a number as the JSON grammar defines it.
func (s *jsonScanner) number() bool {
	d := s.data
	i := s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	s.pos = i
	return true
}

// raw copies a value's bytes, as json.RawMessage does.
func (s *jsonScanner) raw(dst *json.RawMessage) bool {
	s.ws()
	start := s.pos
	if !s.skip(0) {
		return false
	}
	*dst = append(json.RawMessage(nil), s.data[start:s.pos]...)
	return true
}

// object decodes an object whose known keys are names: field is called
// with the index of each known key, positioned at its value; other keys
// are skipped. null leaves the target alone (known is false then). It
// fails on duplicate keys and on keys that encoding/json would match to a
// field case-insensitively or after unescaping, leaving those to it.
func (s *jsonScanner) object(names []string, field func(i int) bool) (known bool, ok bool) {
	if s.null() {
		return false, true
	}
	if !s.consume('{') {
		return false, false
	}
	if s.consume('}') {
		return true, true
	}
	var seen uint32
	for {
		key, escaped, plain, ok := s.rawString()
		if !ok || escaped || !s.consume(':') {
			return false, false
		}
		i := matchKey(names, key, plain)
		switch {
		case i == -2:
			return false, false
		case i == -1:
			if !s.skip(1) {
				return false, false
			}
		default:
			if seen&(1<<i) != 0 {
				return false, false
			}
			seen |= 1 << i
			s.ws()
			if !field(i) {
				return false, false
			}
		}
		if s.consume(',') {
			continue
		}
		return true, s.consume('}')
	}
}

// matchKey returns the index of key among names, -1 for a key
// encoding/json would ignore, -2 for one it might match otherwise.
func matchKey(names []string, key []byte, plain bool) int {
	for i, n := range names {
		if string(key) == n {
			return i
		}
	}
	if !plain {
		return -2 // non-ASCII keys can fold onto ASCII names (U+212A, U+017F)
	}
	for _, n := range names {
		if len(n) == len(key) && strings.EqualFold(n, string(key)) {
			return -2
		}
	}
	return -1
}

// array decodes an array, calling elem positioned at each element. null
// leaves the target alone (isNull true then).
func (s *jsonScanner) array(elem func() bool) (isNull bool, ok bool) {
	if s.null() {
		return true, true
	}
	if !s.consume('[') {
		return false, false
	}
	if s.consume(']') {
		return false, true
	}
	for {
		s.ws()
		if !elem() {
			return false, false
		}
		if s.consume(',') {
			continue
		}
		return false, s.consume(']')
	}
}

// end reports whether only whitespace is left.
func (s *jsonScanner) end() bool {
	s.ws()
	return s.pos == len(s.data)
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// unquote resolves the escapes of a string the scanner accepted, as
// encoding/json does.
func unquote(s []byte) string {
	var b strings.Builder
	b.Grow(len(s))
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch c := s[r+1]; c {
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				rr := hex4(s[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != unicode.ReplacementChar {
							r += 6
							b.WriteRune(dec)
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				b.WriteRune(rr)
				continue
			default: // '"', '\\', '/'
				b.WriteByte(c)
			}
			r += 2
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			b.WriteRune(rr)
			r += size
		}
	}
	return b.String()
}

// ---- the bodies ----

var (
	responseKeys = []string{"id", "model", "choices", "usage", "error"}
	chunkKeys    = responseKeys
	chunkBodyKey = []string{"choices", "usage", "error"}
	choiceKeys   = []string{"index", "message", "finish_reason"}
	deltaKeys    = []string{"index", "delta", "finish_reason"}
	messageKeys  = []string{"content", "reasoning_content", "reasoning", "refusal", "tool_calls", "function_call"}
	callKeys     = []string{"index", "id", "type", "function"}
	functionKeys = []string{"name", "arguments"}
	usageKeys    = []string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details", "prompt_cache_hit_tokens", "total_tokens"}
	cachedKeys   = []string{"cached_tokens"}
	reasonKeys   = []string{"reasoning_tokens"}
)

// fastResponse decodes a blocking body; ok is false when encoding/json
// must decide.
func fastResponse(data []byte, r *chatResponse) bool {
	s := jsonScanner{data: data}
	if s.peek() != '{' {
		return false
	}
	_, ok := s.object(responseKeys, func(i int) bool {
		switch i {
		case 0:
			return s.optStr(&r.ID)
		case 1:
			return s.optStr(&r.Model)
		case 2:
			return sliceOf(&s, &r.Choices, func(c *choice) bool {
				_, ok := s.object(choiceKeys, func(i int) bool {
					switch i {
					case 0:
						return s.intField(&c.Index)
					case 1:
						return s.message(&c.Message)
					default:
						return s.ptrStr(&c.FinishReason)
					}
				})
				return ok
			})
		case 3:
			return s.usage(&r.Usage)
		default:
			return s.raw(&r.Error)
		}
	})
	return ok && s.end()
}

// fastChunk decodes a stream chunk; with bodyOnly, id and model are
// skipped like unknown keys (the parser then decodes into chunkBody).
func fastChunk(data []byte, c *chunk, bodyOnly bool) bool {
	s := jsonScanner{data: data}
	if s.peek() != '{' {
		return false
	}
	keys, off := chunkKeys, 0
	if bodyOnly {
		keys, off = chunkBodyKey, 2
	}
	_, ok := s.object(keys, func(i int) bool {
		switch i + off {
		case 0:
			return s.optStr(&c.ID)
		case 1:
			return s.optStr(&c.Model)
		case 2:
			return sliceOf(&s, &c.Choices, func(ch *chunkChoice) bool {
				_, ok := s.object(deltaKeys, func(i int) bool {
					switch i {
					case 0:
						return s.intField(&ch.Index)
					case 1:
						return s.message(&ch.Delta)
					default:
						return s.ptrStr(&ch.FinishReason)
					}
				})
				return ok
			})
		case 3:
			return s.usage(&c.Usage)
		default:
			return s.raw(&c.Error)
		}
	})
	return ok && s.end()
}

// sliceOf decodes an array into *dst as encoding/json does for a slice
// that is nil: null leaves it nil, [] makes it empty and not nil.
func sliceOf[T any](s *jsonScanner, dst *[]T, elem func(*T) bool) bool {
	out := make([]T, 0, 1)
	isNull, ok := s.array(func() bool {
		out = append(out, *new(T))
		return elem(&out[len(out)-1])
	})
	if !isNull {
		*dst = out
	}
	return ok
}

func (s *jsonScanner) message(m *replyMessage) bool {
	_, ok := s.object(messageKeys, func(i int) bool {
		switch i {
		case 0:
			// A string; an array of chunks (Mistral) is left to
			// encoding/json.
			return s.optStr(&m.Content.Text)
		case 1:
			return s.optStr(&m.ReasoningContent)
		case 2:
			return s.optStr(&m.Reasoning)
		case 3:
			return s.optStr(&m.Refusal)
		case 5:
			if s.null() {
				m.FunctionCall = nil
				return true
			}
			fc := new(replyFunction)
			m.FunctionCall = fc
			return s.function(fc)
		default:
			return sliceOf(s, &m.ToolCalls, func(tc *replyToolCall) bool {
				_, ok := s.object(callKeys, func(i int) bool {
					switch i {
					case 0:
						return s.intField(&tc.Index)
					case 1:
						return s.optStr(&tc.ID)
					case 2:
						return s.optStr(&tc.Type)
					default:
						return s.function(&tc.Function)
					}
				})
				return ok
			})
		}
	})
	return ok
}

func (s *jsonScanner) function(f *replyFunction) bool {
	_, ok := s.object(functionKeys, func(i int) bool {
		if i == 0 {
			return s.optStr(&f.Name)
		}
		return s.optStr(&f.Arguments)
	})
	return ok
}

func (s *jsonScanner) usage(dst **usage) bool {
	if s.null() {
		*dst = nil
		return true
	}
	u := new(usage)
	_, ok := s.object(usageKeys, func(i int) bool {
		switch i {
		case 0:
			return s.integer(&u.PromptTokens, 64)
		case 1:
			return s.integer(&u.CompletionTokens, 64)
		case 2:
			if s.null() {
				return true
			}
			d := &struct {
				CachedTokens int64 `json:"cached_tokens"`
			}{}
			u.PromptTokensDetails = d
			_, ok := s.object(cachedKeys, func(int) bool { return s.integer(&d.CachedTokens, 64) })
			return ok
		case 3:
			if s.null() {
				return true
			}
			d := &struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			}{}
			u.CompletionTokensDetails = d
			_, ok := s.object(reasonKeys, func(int) bool { return s.integer(&d.ReasoningTokens, 64) })
			return ok
		case 4:
			return s.integer(&u.PromptCacheHitTokens, 64)
		default:
			return s.integer(&u.TotalTokens, 64)
		}
	})
	*dst = u
	return ok
}
