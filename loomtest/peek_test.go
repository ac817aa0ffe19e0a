package loomtest

import (
	"encoding/json"
	"testing"
)

func TestPeekStream(t *testing.T) {
	cases := []struct {
		body          string
		stream, usage bool
	}{
		{`{"stream":true}`, true, false},
		{`{"messages":[{"content":"\"stream\":true"}],"stream":false}`, false, false},
		{` { "model" : "m", "stream" : true , "stream_options" : {"include_usage": true} }`, true, true},
		{`{"stream_options":{"include_usage":true}}`, false, false},
		{`{"nested":{"stream":true}}`, false, false},
		{`not json`, false, false},
	}
	for _, c := range cases {
		s, u := peekStream([]byte(c.body))
		if s != c.stream || u != c.usage {
			t.Errorf("%s: stream %v usage %v, want %v %v", c.body, s, u, c.stream, c.usage)
		}
	}
}

// FuzzTopLevelValue checks that the scanner never panics and agrees with
// encoding/json on valid objects.
func FuzzTopLevelValue(f *testing.F) {
	for _, s := range []string{`{"stream":true}`, `{"a":[1,{"stream":false}],"stream":"x\"y"}`, `{"stream":`, `{`, `{"s\"":1}`, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, ok := topLevelValue([]byte(body), "stream")
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(body), &m) != nil {
			return
		}
		want, has := m["stream"]
		if !has {
			return
		}
		// Duplicate keys: encoding/json keeps the last, the scanner the first.
		if ok && json.Valid(got) {
			return
		}
		t.Fatalf("%q: scanner found %q (%v), encoding/json %q", body, got, ok, want)
	})
}
