package openai

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Bodies the fast decoder must take itself (not hand to encoding/json):
// what OpenAI, compatible servers and loomtest send every turn.
var fastBodies = []string{
	toolCallBody,
	`{"id":"chatcmpl-9","object":"chat.completion","model":"deepseek-reasoner","choices":[{"index":0,"message":{"role":"assistant",
"reasoning_content":"think first","content":"Two calls.","tool_calls":[
{"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}},
{"id":"call_c","type":"function","function":{"name":"list_dir","arguments":""}}]},"logprobs":null,"finish_reason":"tool_calls"}],
"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":12,"accepted_prediction_tokens":0}},"system_fingerprint":"fp_1","service_tier":"default"}`,
	`{"id":"x","choices":[{"index":0,"message":{"content":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t","annotations":[{"type":"url_citation","url_citation":{"start_index":1,"end_index":-2.5e3,"x":[true,false,null,{}]}}]},"finish_reason":"stop"}],"usage":null}`,
	`{"choices":[{"index":0,"message":{"content":"héllo wörld 日本"},"finish_reason":null}],"error":null}`,
}

// Chunks the fast decoder must take itself.
var fastChunks = []string{
	`{"id":"chatcmpl-8Zz1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-3.5-turbo-0613","choices":[{"index":0,"delta":{"role":"assistant","content":null,"function_call":{"name":"get_current_weather","arguments":""}},"finish_reason":null}]}`,
	`{"id":"x","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":399,"completion_tokens_details":{"reasoning_tokens":386}}}`,
	`{"id":"chatcmpl-B9","object":"chat.completion.chunk","created":1727000000,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-B9","object":"chat.completion.chunk","created":1727000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"add","arguments":"{\"a\":2,\"b\":3}"}}]},"finish_reason":null}]}`,
	`{"id":"chatcmpl-B9","object":"chat.completion.chunk","created":1727000000,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	`{"id":"chatcmpl-B9","object":"chat.completion.chunk","created":1727000000,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"hm","tool_calls":[{"index":-1,"function":{"arguments":"\"x\""}}]}}],"usage":null}`,
}

// Inputs where the fast path must give up or agree with encoding/json:
// keys that fold onto fields, escaped keys, duplicates, numbers integer
// fields refuse, wrong types, bad syntax anywhere, odd strings.
var trickyBodies = []string{
	`{"ID":"upper","Choices":[{"index":0,"message":{"content":"x"}}]}`,
	`{"\u0069d":"escaped key","choices":[]}`,
	`{"\u212Ad":"kelvin","choices":[]}`,
	`{"ſtop":1,"choices":[]}`,
	`{"id":"a","id":"b","choices":[]}`,
	`{"choices":[{"index":0,"message":{"content":"a"}}],"choices":[{"index":1}]}`,
	`{"choices":[{"index":1.0}]}`,
	`{"choices":[{"index":1e2}]}`,
	`{"choices":[{"index":-0}]}`,
	`{"choices":[{"index":01}]}`,
	`{"choices":[{"index":"0"}]}`,
	`{"choices":[{"index":99999999999999999999}]}`,
	`{"choices":[{"index":9223372036854775807}]}`,
	`{"usage":{"prompt_tokens":-9223372036854775808}}`,
	`{"usage":{"prompt_tokens":null,"prompt_tokens_details":null,"completion_tokens_details":{}}}`,
	`{"usage":{"prompt_tokens_details":[]}}`,
	`{"choices":null,"usage":{},"error":{"message":"x"}}`,
	`{"choices":[null,{"index":0,"message":null,"finish_reason":null}]}`,
	`{"choices":[{"index":0,"message":{"content":["part"]}}]}`,
	`{"choices":[{"index":0,"message":{"content":"\ud800"}}]}`,
	`{"choices":[{"index":0,"message":{"content":"\ud800\u0041"}}]}`,
	`{"choices":[{"index":0,"message":{"content":"\udc00\ud800"}}]}`,
	`{"choices":[{"index":0,"message":{"content":"\ud83d\ude00\ud83d"}}]}`,
	"{\"choices\":[{\"index\":0,\"message\":{\"content\":\"bad \xff\xfe utf8 \xed\xa0\x80\"}}]}",
	"{\"choices\":[{\"index\":0,\"message\":{\"content\":\"ctl \x01\"}}]}",
	`{"choices":[{"index":0,"message":{"content":"bad \x"}}]}`,
	`{"choices":[{"index":0,"message":{"content":"\u00g0"}}]}`,
	`{"choices":[{"index":0,"message":{"content":"x"}}]} trailing`,
	`{"choices":[{"index":0,"message":{"content":"x"}}]}  `,
	`  {"choices":[]}`,
	`{"choices":[],}`,
	`{"choices":[1,]}`,
	`{"x":[1 2]}`,
	`{"x":{"a" 1}}`,
	`{"x":-}`,
	`{"x":1.}`,
	`{"x":.5}`,
	`{"x":1e}`,
	`{"x":+1}`,
	`{"x":tru}`,
	`{"x":nul}`,
	`{"x":truex}`,
	`{"x":"\u12"}`,
	`[{"choices":[]}]`,
	`null`,
	`{"error":"quota"}`,
	`{"error":""}`,
	`{"error":[1,{"a":[]}]}`,
	`{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	`{"x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`,
	`{"choices":[{"index":0,"message":{"tool_calls":[{"index":0,"function":null},{"function":{"name":null,"arguments":"{}"}}]}}]}`,
	`{"choices":[{"index":0,"message":{"tool_calls":{}}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":""}]}`,
	`{"id":1}`,
	`{"model":true}`,
	`{}`,
	`{`,
	``,
	// Content as an array of chunks (Mistral) is left to encoding/json.
	`{"id":"cmpl-e5","object":"chat.completion.chunk","created":1759752086,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"2+2"}]},{"type":"text","text":"4"}]},"finish_reason":null}]}`,
}

// checkFastDecode compares the fast decoder with encoding/json on one
// input, in all three modes: where the fast path decides, encoding/json
// must succeed with an identical value.
func checkFastDecode(t *testing.T, data []byte) {
	t.Helper()
	var fr, jr chatResponse
	if fastResponse(data, &fr) {
		if err := json.Unmarshal(data, &jr); err != nil {
			t.Fatalf("response: the fast path took %q, which encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(fr, jr) {
			t.Fatalf("response %q:\nfast %#v\njson %#v", data, fr, jr)
		}
	}
	for _, bodyOnly := range []bool{false, true} {
		var fc, jc chunk
		if !fastChunk(data, &fc, bodyOnly) {
			continue
		}
		var err error
		if bodyOnly {
			err = json.Unmarshal(data, &jc.chunkBody)
		} else {
			err = json.Unmarshal(data, &jc)
		}
		if err != nil {
			t.Fatalf("chunk (body only %v): the fast path took %q, which encoding/json refuses: %v", bodyOnly, data, err)
		}
		if !reflect.DeepEqual(fc, jc) {
			t.Fatalf("chunk (body only %v) %q:\nfast %#v\njson %#v", bodyOnly, data, fc, jc)
		}
	}
}

func TestFastDecodeTakesCommonBodies(t *testing.T) {
	for _, b := range fastBodies {
		var r chatResponse
		if !fastResponse([]byte(b), &r) {
			t.Errorf("the fast path gave up on %s", b)
		}
		checkFastDecode(t, []byte(b))
	}
	for _, b := range fastChunks {
		for _, bodyOnly := range []bool{false, true} {
			var c chunk
			if !fastChunk([]byte(b), &c, bodyOnly) {
				t.Errorf("the fast path gave up on %s (body only %v)", b, bodyOnly)
			}
		}
		checkFastDecode(t, []byte(b))
	}
}

func TestFastDecodeStreamCorpus(t *testing.T) {
	files, _ := filepath.Glob("testdata/streams/*.sse")
	if len(files) == 0 {
		t.Fatal("no stream corpus in testdata/streams")
	}
	n := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
				checkFastDecode(t, bytes.TrimSpace(data))
				n++
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d data lines in the corpus", n)
	}
}

func TestFastDecodeTricky(t *testing.T) {
	for _, b := range trickyBodies {
		checkFastDecode(t, []byte(b))
	}
	// The ones the fast path must leave to encoding/json, because it
	// would decode them differently from a plain reading.
	for _, b := range []string{trickyBodies[0], trickyBodies[1], trickyBodies[2], trickyBodies[4], trickyBodies[5]} {
		var r chatResponse
		if fastResponse([]byte(b), &r) {
			t.Errorf("the fast path took %s", b)
		}
	}
}

// FuzzFastDecodeMatchesJSON: whatever the fast decoder accepts, it decodes
// exactly as encoding/json does.
func FuzzFastDecodeMatchesJSON(f *testing.F) {
	for _, b := range fastBodies {
		f.Add([]byte(b))
	}
	for _, b := range fastChunks {
		f.Add([]byte(b))
	}
	for _, b := range trickyBodies {
		if len(b) < 1000 {
			f.Add([]byte(b))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastDecode(t, data)
	})
}
