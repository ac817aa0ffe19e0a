package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/internal/sse"
	"github.com/loomkit/loom/model/internal/wire"
)

// parseStream runs a whole SSE body through the decoder and the parser, as
// the adapter does, and returns the events and the error that ended it.
func parseStream(body []byte) ([]llm.Event, error) {
	dec := sse.NewDecoderSize(bytes.NewReader(body), 1<<20)
	p := newParser(opStream, http.Header{"Request-Id": {"req_1"}}, wire.ResolveAnswerLimits(0, 0, 0))
	var all, out []llm.Event
	for {
		ev, err := dec.Next()
		if err != nil {
			if err == io.EOF {
				return all, p.end()
			}
			return all, err
		}
		out, err = p.add(ev.Type, ev.Data, out[:0])
		all = append(all, out...)
		if err != nil || p.done {
			return all, err
		}
	}
}

func corpusSeeds(t testing.TB) [][]byte {
	files, _ := filepath.Glob("../modeltest/testdata/streams/anthropic/*.sse")
	if len(files) == 0 {
		t.Fatal("no corpus found under ../modeltest/testdata/streams/anthropic")
	}
	var seeds [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// FuzzParser feeds arbitrary bytes through the stream decoder and parser:
// nothing panics, a stream ends in a Finish or a typed error, never both,
// and deltas only ever name calls that were started.
func FuzzParser(f *testing.F) {
	for _, s := range corpusSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := parseStream(body)
		started := map[int]bool{}
		finishes := 0
		for i, e := range evs {
			switch e := e.(type) {
			case nil:
				t.Fatalf("nil event %d", i)
			case llm.ToolCallStart:
				started[e.Index] = true
			case llm.ToolCallDelta:
				if !started[e.Index] {
					t.Fatalf("delta for call %d that never started", e.Index)
				}
			case llm.ToolCallEnd:
				if !started[e.Index] {
					t.Fatalf("end for call %d that never started", e.Index)
				}
			case llm.Finish:
				finishes++
				if i != len(evs)-1 {
					t.Fatalf("Finish at %d of %d events", i, len(evs))
				}
			}
		}
		if err != nil {
			var me *model.Error
			if !errors.As(err, &me) && !errors.Is(err, sse.ErrLineTooLong) && !errors.Is(err, sse.ErrEventTooLarge) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if finishes != 0 {
				t.Fatalf("a Finish and an error: %v", err)
			}
			return
		}
		if finishes != 1 {
			t.Fatalf("a stream without error has %d Finish events", finishes)
		}
		var acc llm.Accumulator
		for _, e := range evs {
			acc.Add(e)
		}
		if acc.Response().Truncated {
			t.Fatal("a finished stream folds to a truncated response")
		}
	})
}

func TestParserCorpusNeverPanics(t *testing.T) {
	for _, s := range corpusSeeds(t) {
		if _, err := parseStream(s); err != nil {
			var me *model.Error
			if !errors.As(err, &me) {
				t.Errorf("untyped error: %v", err)
			}
		}
	}
}

// FuzzAppendJSONString checks the one-pass string encoder against
// encoding/json: always valid JSON, decoding to what encoding/json makes of
// the same string.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote \" backslash \\ newline \n tab \t", "\x00\x1f\x7f", "é✓\u2028\u2029", "\xff\xfe bad utf8 \xc3", "<html>&amp;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendJSONString(nil, s)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON %q for %q", got, s)
		}
		var back, want string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		ref, _ := json.Marshal(s)
		json.Unmarshal(ref, &want)
		if back != want {
			t.Fatalf("%q encodes to %s, which decodes to %q; encoding/json gives %q", s, got, back, want)
		}
	})
}

func TestParserProtocolErrorsAreTyped(t *testing.T) {
	cases := map[string]string{
		"gap":            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		"delta mismatch": "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
		"no index":       "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\nevent: content_block_stop\ndata: {\"type\":\"content_block_stop\"}\n\n",
		"two starts":     "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\nevent: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n",
	}
	for name, body := range cases {
		_, err := parseStream([]byte(body))
		if model.KindOf(err) != model.KindInvalidResponse || !strings.Contains(err.Error(), "stream event") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// FuzzFastDelta checks the reflection-free delta reader against
// encoding/json: whatever it accepts, encoding/json reads the same way.
func FuzzFastDelta(f *testing.F) {
	for _, s := range []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
		`{"delta":{"partial_json":"{\"a\":","type":"input_json_delta"},"index":12,"type":"content_block_delta"}`,
		` { "type" : "content_block_delta" , "index" : 3 , "delta" : { "type" : "thinking_delta" , "thinking" : "é\u00e9\n" } } `,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc="}}`,
		`{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":0,"index":1,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\xff"}}`,
		`{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		index, dtype, payload, ok := fastDelta(data)
		if !ok {
			return
		}
		var ev streamEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("fastDelta accepted %q, which encoding/json refuses: %v", data, err)
		}
		if ev.Type != "content_block_delta" || ev.Index == nil || *ev.Index != index || ev.Delta == nil || ev.Delta.Type != dtype {
			t.Fatalf("%q: fast %d %q, full %+v", data, index, dtype, ev)
		}
		want := map[string]string{"text_delta": ev.Delta.Text, "thinking_delta": ev.Delta.Thinking, "signature_delta": ev.Delta.Signature, "input_json_delta": ev.Delta.PartialJSON}[dtype]
		if payload != want {
			t.Fatalf("%q: fast payload %q, full %q", data, payload, want)
		}
	})
}

func TestFastDeltaShapes(t *testing.T) {
	accept := []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
		`{"delta":{"partial_json":"{\"a\":","type":"input_json_delta"},"index":12,"type":"content_block_delta"}`,
	}
	refuse := []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","thinking":"x"}}`,
		`{"type":"content_block_delta","index":0.5,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}} trailing`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"},"extra":1}`,
		`{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}`,
	}
	for _, s := range accept {
		if _, _, _, ok := fastDelta([]byte(s)); !ok {
			t.Errorf("refused %s", s)
		}
	}
	for _, s := range refuse {
		if _, _, _, ok := fastDelta([]byte(s)); ok {
			t.Errorf("accepted %s", s)
		}
	}
}
