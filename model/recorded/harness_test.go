package recorded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

// The tests below attack the replay harness itself: it must serve the
// recorded bytes unchanged, refuse a call the recording does not answer,
// and notice any expectation that differs from the answer.

func TestFramesKeepBytes(t *testing.T) {
	for _, rec := range loadCorpus(t) {
		frames, err := rec.frames()
		if err != nil {
			t.Errorf("%s: %v", rec.name, err)
			continue
		}
		all := bytes.Join(frames, nil)
		pieces := cut(all, pieceSize(len(all)))
		if !bytes.Equal(bytes.Join(pieces, nil), all) {
			t.Errorf("%s: the pieces do not join into the frames", rec.name)
		}
		if rec.Framing == "raw" {
			if !bytes.Equal(all, rec.data) {
				t.Errorf("%s: the frames are not the body file", rec.name)
			}
			continue
		}
		// jsonl: every payload line is served whole, as its own event.
		var lines []string
		for line := range strings.Lines(string(rec.data)) {
			if line = strings.TrimRight(line, "\r\n"); strings.TrimSpace(line) != "" {
				lines = append(lines, line)
			}
		}
		var payloads []string
		for _, fr := range frames {
			for line := range strings.Lines(string(fr)) {
				if p, ok := strings.CutPrefix(line, "data: "); ok {
					payloads = append(payloads, strings.TrimSuffix(p, "\n"))
				}
			}
			if !bytes.HasSuffix(fr, []byte("\n\n")) {
				t.Errorf("%s: frame %q does not end an event", rec.name, fr)
			}
		}
		if rec.Format == "openai" {
			if len(payloads) == 0 || payloads[len(payloads)-1] != "[DONE]" {
				t.Errorf("%s: the stream does not end with [DONE]", rec.name)
			} else {
				payloads = payloads[:len(payloads)-1]
			}
		}
		if !slices.Equal(payloads, lines) {
			t.Errorf("%s: the served payloads are not the file's lines", rec.name)
		}
	}
}

func TestSplitEvents(t *testing.T) {
	in := "data: a\n\ndata: b\r\n\r\n: comment\ndata: c\n\ndata: tail"
	got := splitEvents([]byte(in))
	want := []string{"data: a\n\n", "data: b\r\n\r\n", ": comment\ndata: c\n\n", "data: tail"}
	if len(got) != len(want) {
		t.Fatalf("got %d pieces %q, want %q", len(got), got, want)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("piece %d = %q, want %q", i, got[i], want[i])
		}
	}
	if !bytes.Equal(bytes.Join(got, nil), []byte(in)) {
		t.Errorf("the pieces do not join into the input")
	}
}

func TestPieceSize(t *testing.T) {
	for _, n := range []int{0, 1, 500, 10_000, 287_452, 5_000_000} {
		p := pieceSize(n)
		if p < 7 || p%2 == 0 {
			t.Errorf("pieceSize(%d) = %d, want odd and at least 7", n, p)
		}
		if n/p > 1500 {
			t.Errorf("pieceSize(%d) = %d makes %d writes", n, p, n/p)
		}
	}
}

// TestServerRefusesTheWrongCall: a stream recording asked for a blocking
// answer (or the other way round) is an error of the harness, never a
// replay.
func TestServerRefusesTheWrongCall(t *testing.T) {
	recs := loadCorpus(t)
	s := newServer(t, recs)
	req := llm.Request{Messages: []llm.Message{llm.UserText("hi")}}
	var stream, generate *recording
	for _, r := range recs {
		if r.Status != 200 {
			continue
		}
		if r.Call == "stream" && stream == nil {
			stream = r
		}
		if r.Call == "generate" && generate == nil {
			generate = r
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := s.model(stream, "events").Generate(ctx, req)
	if st := status(err); st != errHarness {
		t.Errorf("a blocking call of %s: status %d (%v), want %d", stream.name, st, err, errHarness)
	}
	o := collect(s.model(generate, "events").Stream(ctx, req))
	if st := status(o.err); st != errHarness {
		t.Errorf("a streaming call of %s: status %d (%v), want %d", generate.name, st, o.err, errHarness)
	}
	_, err = s.model(generate, "nowhere").Generate(ctx, req)
	if st := status(err); st != errHarness {
		t.Errorf("an unknown mode: status %d (%v), want %d", st, err, errHarness)
	}
}

func status(err error) int {
	var me *model.Error
	if errors.As(err, &me) {
		return me.Status
	}
	return 0
}

func TestSameArguments(t *testing.T) {
	blocking := &recording{Format: "anthropic", Call: "generate"}
	streamed := &recording{Format: "anthropic", Call: "stream"}
	openaiRec := &recording{Format: "openai", Call: "generate"}
	cases := []struct {
		rec       *recording
		got, want string
		same      bool
	}{
		{blocking, `{"a":1,"b":[2]}`, "{\n  \"b\": [2],\n  \"a\": 1\n}", true},
		{blocking, `{"a":1}`, `{"a":1.0}`, false},
		{blocking, `{"a":1}`, `{"a":1}{}`, false},
		{blocking, `{"a":"x"}`, `{"a":"y"}`, false},
		{blocking, `not json`, `not json`, false},
		{streamed, `{"a": 1}`, `{"a":1}`, false},
		{openaiRec, `{"a":1}`, `{"a":1}`, true},
		{openaiRec, `{"a":1}`, `{"a": 1}`, false},
	}
	for _, c := range cases {
		if got := sameArguments(c.rec, c.got, c.want); got != c.same {
			t.Errorf("%s %s: sameArguments(%q, %q) = %v, want %v", c.rec.Format, c.rec.Call, c.got, c.want, got, c.same)
		}
	}
}

// TestExpectationsBite changes one thing at a time in the expectations of
// recordings that replay cleanly and checks that each change is noticed.
func TestExpectationsBite(t *testing.T) {
	recs := loadCorpus(t)
	s := newServer(t, recs)
	byName := map[string]*recording{}
	for _, r := range recs {
		byName[r.name] = r
	}
	mutations := []struct {
		name  string
		apply func(w *want) bool // false: does not apply to this expectation
	}{
		{"id", func(w *want) bool { w.ID += "x"; return w.Error == nil }},
		{"model", func(w *want) bool { w.Model += "x"; return w.Error == nil }},
		{"request id", func(w *want) bool { w.RequestID += "x"; return w.RequestID != "x" }},
		{"text longer", func(w *want) bool { return w.Text != nil && set(&w.Text, *w.Text+"x") }},
		{"text shorter", func(w *want) bool { return w.Text != nil && *w.Text != "" && set(&w.Text, (*w.Text)[1:]) }},
		{"finish", func(w *want) bool { return w.Finish != nil && set(&w.Finish, "other") }},
		{"thinking text", func(w *want) bool { return len(w.Thinking) > 0 && addX(&w.Thinking[0].Text) }},
		{"signature", func(w *want) bool {
			return len(w.Thinking) > 0 && w.Thinking[0].Signature != nil && set(&w.Thinking[0].Signature, *w.Thinking[0].Signature+"x")
		}},
		{"redacted", func(w *want) bool { return len(w.Thinking) > 0 && addX(&w.Thinking[len(w.Thinking)-1].Redacted) }},
		{"one more thinking part", func(w *want) bool {
			w.Thinking = append(w.Thinking, wantThinking{Text: "x"})
			return w.Error == nil
		}},
		{"call id", func(w *want) bool { return len(w.Calls) > 0 && addX(&w.Calls[0].ID) }},
		{"call name", func(w *want) bool { return len(w.Calls) > 0 && addX(&w.Calls[0].Name) }},
		{"call arguments", func(w *want) bool {
			return len(w.Calls) > 0 && set2(&w.Calls[len(w.Calls)-1].Arguments, `{"changed":true}`)
		}},
		{"call order", func(w *want) bool {
			if len(w.Calls) < 2 {
				return false
			}
			w.Calls[0], w.Calls[1] = w.Calls[1], w.Calls[0]
			return true
		}},
		{"one call fewer", func(w *want) bool {
			if len(w.Calls) == 0 {
				return false
			}
			w.Calls = w.Calls[1:]
			return true
		}},
		{"usage input", func(w *want) bool { return w.Usage != nil && inc(&w.Usage.Input) }},
		{"usage output", func(w *want) bool { return w.Usage != nil && inc(&w.Usage.Output) }},
		{"usage cache read", func(w *want) bool { return w.Usage != nil && inc(&w.Usage.CacheRead) }},
		{"usage cache write", func(w *want) bool { return w.Usage != nil && inc(&w.Usage.CacheWrite) }},
		{"usage reasoning", func(w *want) bool { return w.Usage != nil && inc(&w.Usage.Reasoning) }},
		{"no usage", func(w *want) bool {
			ok := w.Usage != nil && *w.Usage != (wantUsage{})
			w.Usage = nil
			return ok
		}},
		{"error kind", func(w *want) bool { return w.Error != nil && setKind(&w.Error.Kind) }},
		{"error status", func(w *want) bool { return w.Error != nil && w.Error.Status != 0 && inc2(&w.Error.Status) }},
		{"error type", func(w *want) bool { return w.Error != nil && w.Error.Type != "" && addX(&w.Error.Type) }},
		{"error retryable", func(w *want) bool {
			if w.Error == nil || w.Error.Retryable == nil {
				return false
			}
			flip := !*w.Error.Retryable
			w.Error.Retryable = &flip
			return true
		}},
	}
	names := []string{
		"anthropic/sonnet4-thinking-stream", // thinking with signature, a streamed call
		"anthropic/sonnet4-parallel-tools",  // parallel calls, blocking input compared as JSON
		"anthropic/pydantic-redacted-thinking-stream",
		"openai/gpt4o-parallel-tools-stream",   // parallel streamed calls
		"openai/mirascope-cache-read",          // cached tokens, a gzip body, a request id
		"deepseek/aisdk-tool-call",             // reasoning_content, reasoning tokens
		"anthropic/mirascope-auth-error",       // an error with type, status, x-should-retry
		"groq/pydantic-tool-use-failed-stream", // an error event after HTTP 200
	}
	for _, name := range names {
		rec := byName[name]
		if rec == nil {
			t.Fatalf("no recording %s", name)
		}
		t.Run(name, func(t *testing.T) {
			o := s.call(t, rec, "events")
			if ps := append(o.stream, compare(rec, rec.Want, o.resp, o.err)...); len(ps) > 0 {
				t.Fatalf("the recording does not replay cleanly, so it cannot test the checks: %v", ps)
			}
			applied := 0
			for _, m := range mutations {
				w := cloneWant(t, rec.Want)
				if !m.apply(&w) {
					continue
				}
				applied++
				if ps := compare(rec, w, o.resp, o.err); len(ps) == 0 {
					t.Errorf("changing the %s went unnoticed", m.name)
				}
			}
			if applied < 2 {
				t.Errorf("only %d changes apply", applied)
			}
		})
	}
}

func cloneWant(t *testing.T, w want) want {
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var c want
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func set(p **string, v string) bool { *p = &v; return true }
func set2(p *string, v string) bool { *p = v; return true }
func addX(p *string) bool           { *p += "x"; return true }
func inc(p *int64) bool             { *p++; return true }
func inc2(p *int) bool              { *p++; return true }
func setKind(k *model.Kind) bool {
	if *k == model.KindServer {
		*k = model.KindAuth
	} else {
		*k = model.KindServer
	}
	return true
}

// TestCorpusProblems: the corpus check notices a body without its source
// line, a line twice, a line without its commit, a stray file and a line
// no recording uses.
func TestCorpusProblems(t *testing.T) {
	recs := []*recording{{name: "p/a", Body: "a.sse"}, {name: "p/b", Body: "b.json"}}
	const head = "| Provider | File | Repository | Path | Commit | Licence |\n|---|---|---|---|---|---|\n"
	line := func(body, commit string) string {
		return "| p | " + body + " | o/r | x/" + body + " | " + commit + " | MIT |\n"
	}
	commit := strings.Repeat("c", 40)
	files := []string{"p/a.sse", "p/a.expect.json", "p/b.json", "p/b.expect.json"}
	good := head + line("a.sse", commit) + line("b.json", commit)
	if ps := corpusProblems(recs, good, files); len(ps) != 0 {
		t.Fatalf("a good corpus has problems: %v", ps)
	}
	cases := map[string]struct {
		sources string
		files   []string
	}{
		"no line":      {head + line("a.sse", commit), files},
		"a line twice": {good + line("b.json", commit), files},
		"short commit": {head + line("a.sse", "abc1234") + line("b.json", commit), files},
		"unused line":  {good + line("c.json", commit), files},
		"stray file":   {good, append(slices.Clone(files), "p/c.json")},
		"shared body":  {good, files},
	}
	for name, c := range cases {
		rs := recs
		if name == "shared body" {
			rs = append(slices.Clone(recs), &recording{name: "p/c", Body: "a.sse"})
		}
		if ps := corpusProblems(rs, c.sources, c.files); len(ps) == 0 {
			t.Errorf("%s: not noticed", name)
		}
	}
}
