package modeltest

import (
	"context"
	"embed"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
)

// The corpus: hand-written streams, one per file, under
// testdata/streams/<format>/. The first line of each is an SSE comment
// (which every decoder skips) saying how the stream must end:
//
//	: expect ok text="Hello" calls=2 finish=tool_calls in=40 cache_read=8 out=15 incomplete=1 malformed=1
//	: expect truncated_stream
//
// "ok" means the stream ends without error and its fold has the given
// text, number of tool calls, finish reason, input, cache-read and output
// tokens (in llm.Usage's convention) and numbers of incomplete and
// malformed calls (each optional). Any other word is the model.Kind the
// stream must fail with.
//
//go:embed testdata/streams
var corpus embed.FS

type expectation struct {
	kind       model.Kind // "" for ok
	text       *string
	calls      *int
	finish     *llm.FinishReason
	out        *int64
	in         *int64
	cacheRead  *int64
	incomplete *int
	malformed  *int
	names      *string
}

var expectField = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

func parseExpectation(data string) (expectation, error) {
	data = strings.TrimPrefix(data, "\uFEFF")
	line := data
	if i := strings.IndexAny(data, "\r\n"); i >= 0 {
		line = data[:i]
	}
	rest, ok := strings.CutPrefix(line, ": expect ")
	if !ok {
		return expectation{}, fmt.Errorf("the first line %q is not \": expect ...\"", line)
	}
	word, fields, _ := strings.Cut(rest, " ")
	var e expectation
	if word != "ok" {
		e.kind = model.Kind(word)
	}
	for _, m := range expectField.FindAllStringSubmatch(fields, -1) {
		key, val := m[1], m[2]
		if strings.HasPrefix(val, `"`) {
			u, err := strconv.Unquote(val)
			if err != nil {
				return e, fmt.Errorf("%s: %v", key, err)
			}
			val = u
		}
		num := func() (int, error) { return strconv.Atoi(val) }
		switch key {
		case "text":
			e.text = &val
		case "finish":
			f := llm.FinishReason(val)
			e.finish = &f
		case "names":
			e.names = &val
		case "calls", "incomplete", "malformed", "out", "in", "cache_read":
			n, err := num()
			if err != nil {
				return e, fmt.Errorf("%s: %v", key, err)
			}
			switch key {
			case "calls":
				e.calls = &n
			case "incomplete":
				e.incomplete = &n
			case "malformed":
				e.malformed = &n
			case "out":
				v := int64(n)
				e.out = &v
			case "in":
				v := int64(n)
				e.in = &v
			case "cache_read":
				v := int64(n)
				e.cacheRead = &v
			}
		default:
			return e, fmt.Errorf("unknown expectation %q", key)
		}
	}
	return e, nil
}

func (s Suite) testCorpus(t *testing.T) {
	dir := path.Join("testdata/streams", string(s.Format))
	entries, err := corpus.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("no corpus for %s: %v", s.Format, err)
	}
	for _, ent := range entries {
		name := ent.Name()
		if !strings.HasSuffix(name, ".sse") {
			continue
		}
		data, err := corpus.ReadFile(path.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(strings.TrimSuffix(name, ".sse"), func(t *testing.T) {
			want, err := parseExpectation(string(data))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			m, _ := s.start(t, loomtest.Config{Turns: []loomtest.Turn{loomtest.RawStream(string(data))}}, Setup{})
			resp, evs, err := StreamCall(context.Background(), m, baseRequest)
			want.check(t, resp, evs, err)
		})
	}
	t.Run("40 MiB line", func(t *testing.T) {
		// One data line beyond the 32 MiB bound: a clear error, not an
		// unbounded buffer.
		body := "data: {\"x\":\"" + strings.Repeat("a", 40<<20) + "\"}\n\n"
		m, _ := s.start(t, loomtest.Config{Turns: []loomtest.Turn{loomtest.RawStream(body)}}, Setup{})
		_, _, err := StreamCall(context.Background(), m, baseRequest)
		if k := model.KindOf(err); k != model.KindInvalidResponse {
			t.Fatalf("err = %v, want invalid_response", err)
		}
	})
}

func (e expectation) check(t *testing.T, resp llm.Response, evs []llm.Event, err error) {
	t.Helper()
	if e.kind != "" {
		if k := model.KindOf(err); k != e.kind {
			t.Fatalf("err = %v (kind %q), want kind %s", err, k, e.kind)
		}
		if !resp.Truncated {
			t.Error("the fold of a failed stream is not Truncated")
		}
		for _, c := range resp.ToolCalls() {
			if !c.Incomplete {
				t.Errorf("call %s of a failed stream is not Incomplete", c.ID)
			}
		}
	} else if err != nil {
		t.Fatalf("err = %v, want a complete stream", err)
	}
	if e.text != nil && resp.Text() != *e.text {
		t.Errorf("text %q, want %q", resp.Text(), *e.text)
	}
	calls := resp.ToolCalls()
	if e.calls != nil && len(calls) != *e.calls {
		t.Errorf("%d calls, want %d: %+v", len(calls), *e.calls, calls)
	}
	if e.names != nil {
		var names []string
		for _, c := range calls {
			names = append(names, c.Name+"("+c.Arguments+")")
		}
		if got := strings.Join(names, " "); got != *e.names {
			t.Errorf("calls %q, want %q", got, *e.names)
		}
	}
	count := func(f func(llm.ToolCall) bool) int {
		n := 0
		for _, c := range calls {
			if f(c) {
				n++
			}
		}
		return n
	}
	if e.incomplete != nil {
		if n := count(func(c llm.ToolCall) bool { return c.Incomplete }); n != *e.incomplete {
			t.Errorf("%d incomplete calls, want %d: %+v", n, *e.incomplete, calls)
		}
	}
	if e.malformed != nil {
		if n := count(func(c llm.ToolCall) bool { return c.Malformed }); n != *e.malformed {
			t.Errorf("%d malformed calls, want %d: %+v", n, *e.malformed, calls)
		}
	}
	if e.finish != nil && resp.FinishReason != *e.finish {
		t.Errorf("finish %q, want %q", resp.FinishReason, *e.finish)
	}
	if e.out != nil && resp.Usage.OutputTokens != *e.out {
		t.Errorf("output tokens %d, want %d", resp.Usage.OutputTokens, *e.out)
	}
	if e.in != nil && resp.Usage.InputTokens != *e.in {
		t.Errorf("input tokens %d, want %d", resp.Usage.InputTokens, *e.in)
	}
	if e.cacheRead != nil && resp.Usage.CacheReadTokens != *e.cacheRead {
		t.Errorf("cache-read tokens %d, want %d", resp.Usage.CacheReadTokens, *e.cacheRead)
	}
	for i, ev := range evs {
		if _, ok := ev.(llm.Finish); ok && (err != nil || i != len(evs)-1) {
			t.Errorf("event %d of %d is a Finish (stream error %v)", i, len(evs), err)
		}
	}
}
