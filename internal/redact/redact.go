// Package redact scrubs secrets from what leaves loom: the values of the
// credentials loom was given (API keys, the password of a URL), in the forms
// they take in text, JSON and URLs, and the userinfo of every URL
// (scheme://user:password@host).
//
// A Redactor is built once from the secrets in use and applied where text
// leaves the process: the writers behind standard output and error
// (Writer), log handlers (Handler), trace exports, stored records and
// errors (String, Bytes). Text that arrives in pieces (streamed answers)
// goes through a Writer or a Stream, which hold back the end of a piece
// that may be the start of a secret until the next piece shows whether it
// is one.
package redact

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Mask replaces what is scrubbed.
const Mask = "[redacted]"

// MinSecret is the length in bytes a value must have to be scrubbed
// wherever it appears: shorter values would mangle ordinary text (a key
// "test" would scrub every "test"). A shorter password in a URL is still
// scrubbed with the URL's userinfo.
const MinSecret = 8

// Redactor scrubs secrets from text. The zero Redactor, and a nil one,
// scrub URL userinfo only. A Redactor is safe for concurrent use; Add may
// be called while others scrub.
type Redactor struct {
	mu      sync.Mutex               // serializes Add
	secrets atomic.Pointer[[]string] // the forms to scrub, longest first; replaced whole by Add
}

// New returns a Redactor of the given secrets. Values shorter than
// MinSecret are left out.
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add adds secrets to those r scrubs.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var forms []string
	if p := r.secrets.Load(); p != nil {
		forms = slices.Clone(*p)
	}
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) < MinSecret {
			continue
		}
		for _, f := range variants(s) {
			if !slices.Contains(forms, f) {
				forms = append(forms, f)
			}
		}
	}
	// Longest first, so that a secret holding another is scrubbed whole.
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	r.secrets.Store(&forms)
}

// variants returns the forms s takes in text: as it is, escaped in a JSON
// string (with and without HTML escaping) and escaped in a URL.
func variants(s string) []string {
	out := []string{s}
	add := func(v string) {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if b, err := json.Marshal(s); err == nil {
		add(string(b[1 : len(b)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(s) == nil {
		b := bytes.TrimSpace(buf.Bytes())
		add(string(b[1 : len(b)-1]))
	}
	add(url.QueryEscape(s))
	add(url.PathEscape(s))
	return out
}

func (r *Redactor) forms() []string {
	if r == nil {
		return nil
	}
	if p := r.secrets.Load(); p != nil {
		return *p
	}
	return nil
}

// Len reports how many forms of secrets r scrubs.
func (r *Redactor) Len() int { return len(r.forms()) }

// String returns s with every secret of r and the userinfo of every URL
// replaced by Mask.
func (r *Redactor) String(s string) string {
	out, _ := r.scrub(s)
	return out
}

// Bytes is String for a byte slice. It returns b itself when there is
// nothing to scrub.
func (r *Redactor) Bytes(b []byte) []byte {
	if !r.needs(b) {
		return b
	}
	return []byte(r.String(string(b)))
}

// needs reports quickly whether b may hold something to scrub.
func (r *Redactor) needs(b []byte) bool {
	if bytes.Contains(b, []byte("://")) {
		return true
	}
	for _, f := range r.forms() {
		if bytes.Contains(b, []byte(f)) {
			return true
		}
	}
	return false
}

// scrub scrubs s and returns, too, where in the result the last Mask
// ends (0 when there is none): text before it is settled.
func (r *Redactor) scrub(s string) (string, int) {
	for _, f := range r.forms() {
		if strings.Contains(s, f) {
			s = strings.ReplaceAll(s, f, Mask)
		}
	}
	s = userinfo(s)
	end := 0
	if i := strings.LastIndex(s, Mask); i >= 0 {
		end = i + len(Mask)
	}
	return s, end
}

// userinfo replaces the userinfo of every URL in s by Mask.
func userinfo(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	last := 0
	for from := 0; ; {
		i := strings.Index(s[from:], "://")
		if i < 0 {
			break
		}
		i += from
		auth := i + 3
		stop := auth
		for stop < len(s) && !authorityEnd(s[stop]) {
			stop++
		}
		at := strings.LastIndexByte(s[auth:stop], '@')
		if at > 0 && schemeStart(s, i) < i && s[auth:auth+at] != Mask {
			b.WriteString(s[last:auth])
			b.WriteString(Mask)
			last = auth + at
		}
		from = stop
		if from == i {
			from = auth
		}
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// authorityEnd reports whether c ends a URL's authority: the path, query
// or fragment, or what cannot be in one (space, quotes, brackets of
// text).
func authorityEnd(c byte) bool {
	switch c {
	case '/', '?', '#', ' ', '\t', '\n', '\r', '"', '\'', '<', '>', '\\', '`', '(', ')', '{', '}', '|', '^':
		return true
	}
	return false
}

// schemeStart returns where the URL scheme ending at s[i] starts (a
// letter, then letters, digits, +, - or .), or i when none does.
func schemeStart(s string, i int) int {
	j := i
	for j > 0 {
		c := s[j-1] | 0x20
		if 'a' <= c && c <= 'z' || '0' <= s[j-1] && s[j-1] <= '9' || s[j-1] == '+' || s[j-1] == '-' || s[j-1] == '.' {
			j--
			continue
		}
		break
	}
	for j < i && !('a' <= s[j]|0x20 && s[j]|0x20 <= 'z') {
		j++ // a scheme starts with a letter
	}
	return j
}

// hold returns how many bytes at the end of s may be the start of
// something to scrub: the longest suffix after keep that is a proper
// prefix of a secret's form, or, after floor, a URL whose authority has
// not ended yet (it may still turn into user:password@host), or a scheme
// and the start of "://". A URL is held even when a secret in it was
// scrubbed already: its userinfo is scrubbed whole once it ends.
func (r *Redactor) hold(s string, keep, floor int) int {
	n := 0
	for _, f := range r.forms() {
		for j := max(keep, len(s)-len(f)+1); j < len(s)-n; j++ {
			if s[j] == f[0] && strings.HasPrefix(f, s[j:]) {
				n = len(s) - j
				break
			}
		}
	}
	from := func(start int) {
		if start = max(start, floor); start < len(s) {
			n = max(n, len(s)-start)
		}
	}
	if i := strings.LastIndex(s, "://"); i >= 0 && i+3 > floor {
		open := true
		for k := i + 3; k < len(s); k++ {
			if authorityEnd(s[k]) {
				open = false
				break
			}
		}
		if j := schemeStart(s, i); open && j < i {
			from(j)
		}
	}
	for _, tail := range []string{":", ":/"} {
		if i := len(s) - len(tail); strings.HasSuffix(s, tail) {
			if j := schemeStart(s, i); j < i {
				from(j)
			}
		}
	}
	return min(n, maxHold)
}

// maxHold bounds what a Stream or Writer holds back.
const maxHold = 4096
