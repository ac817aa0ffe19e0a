package anthropic

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// fastDelta reads the data of a content_block_delta event of the usual
// shape, {"type":"content_block_delta","index":N,"delta":{"type":T,F:S}}
// with the members in any order, without reflection. It accepts only
// well-formed JSON with exactly those members, where F is the payload
// member of T (text, thinking, signature or partial_json); for anything
// else ok is false, and the caller decodes the event in full, so both
// paths agree on every input.
func fastDelta(data []byte) (index int, dtype, payload string, ok bool) {
	s := jscan{b: data}
	var sawType, sawIndex, sawDelta bool
	fields := s.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			v, good := s.raw()
			sawType = good && string(v) == "content_block_delta"
			return sawType
		case "index":
			n, good := s.integer()
			index, sawIndex = n, good
			return good
		case "delta":
			if sawDelta {
				return false
			}
			sawDelta = true
			var sawPayload bool
			var payloadKey, typ []byte
			okDelta := s.object(func(key []byte) bool {
				if string(key) == "type" {
					v, good := s.raw()
					typ = v
					return good
				}
				if sawPayload {
					return false
				}
				v, good := s.str()
				sawPayload, payloadKey, payload = good, key, v
				return good
			})
			if !okDelta || !sawPayload {
				return false
			}
			want := ""
			switch string(typ) {
			case "text_delta":
				dtype, want = "text_delta", "text"
			case "thinking_delta":
				dtype, want = "thinking_delta", "thinking"
			case "signature_delta":
				dtype, want = "signature_delta", "signature"
			case "input_json_delta":
				dtype, want = "input_json_delta", "partial_json"
			}
			return want != "" && string(payloadKey) == want
		}
		return false
	})
	if !fields || !sawType || !sawIndex || !sawDelta || !s.end() {
		return 0, "", "", false
	}
	return index, dtype, payload, true
}

// jscan is a minimal JSON reader for fastDelta: objects, strings and
// integers, refusing whatever it does not fully understand.
type jscan struct {
	b []byte
	i int
}

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// object reads an object, calling member for each key with the scanner at
// the member's value; member reads the value and reports success. Duplicate
// keys are refused (encoding/json keeps the last; we do not guess).
func (s *jscan) object(member func(key []byte) bool) bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	seen := [4][]byte{}
	n := 0
	for first := true; ; first = false {
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		if s.b[s.i] == '}' {
			s.i++
			return true
		}
		if !first {
			if s.b[s.i] != ',' {
				return false
			}
			s.i++
			s.ws()
		}
		key, ok := s.raw()
		if !ok || n == len(seen) {
			return false
		}
		for _, k := range seen[:n] {
			if string(k) == string(key) {
				return false
			}
		}
		seen[n] = key
		n++
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		if !member(key) {
			return false
		}
	}
}

// raw reads a string without escapes (keys, type names) and returns its
// bytes, valid until the data changes; a string with escapes is refused.
func (s *jscan) raw() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := s.b[s.i+1 : j]
			s.i = j + 1
			return v, utf8.Valid(v)
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// str reads a string. Strings with escapes are unquoted by encoding/json.
func (s *jscan) str() (string, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	start := s.i
	escaped, ascii := false, true
	for j := s.i + 1; j < len(s.b); j++ {
		c := s.b[j]
		switch {
		case c == '"':
			s.i = j + 1
			raw := s.b[start+1 : j]
			if escaped {
				var v string
				if json.Unmarshal(s.b[start:j+1], &v) != nil {
					return "", false
				}
				return v, true
			}
			if !ascii && !utf8.Valid(raw) {
				return "", false // encoding/json would replace bad bytes; let it
			}
			return string(raw), true
		case c == '\\':
			escaped = true
			j++
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// integer reads a small non-negative or negative integer.
func (s *jscan) integer() (int, bool) {
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || s.i-digits > 9 || (s.b[digits] == '0' && s.i-digits > 1) {
		return 0, false
	}
	n, err := strconv.Atoi(string(s.b[start:s.i]))
	return n, err == nil
}

// end reports whether only white space is left.
func (s *jscan) end() bool {
	s.ws()
	return s.i == len(s.b)
}
