package loomtest

import (
	"fmt"
	"net/http"
	"strconv"
)

// floodFrames are the pieces of an answer made by Turn.Flood: what opens
// the flood in a stream (after the turn's content), one event of it, and a
// blocking body's start, one repeat and end.
type floodFrames struct {
	open, unit                   []byte
	bodyHead, bodyUnit, bodyTail []byte
}

// floodArgsHead and floodArgsTail wrap the flood when it is a call's
// arguments: {"content":"<flood...>"}.
const (
	floodArgsHead = `{"content":"`
	floodArgsTail = `"}`
)

// encodeFlood encodes the flood of t; next is the index of the next
// content block (Anthropic) or call slot (OpenAI).
func encodeFlood(f Format, t *Turn, id, model string, next int) *floodFrames {
	if t.Flood == "" {
		return nil
	}
	unit := jsonStringBody(t.Flood) // the flood inside a JSON string
	q := func(s string) string { return string(mustJSON(s)) }
	fl := &floodFrames{}
	switch {
	case f == Anthropic && t.FloodCall == "":
		fl.open = sseFrame("content_block_start", fmt.Appendf(nil, `{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, next))
		fl.unit = sseFrame("content_block_delta", fmt.Appendf(nil, `{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":"%s"}}`, next, unit))
		fl.bodyHead = []byte(`{"id":` + q(id) + `,"type":"message","role":"assistant","model":` + q(model) + `,"content":[{"type":"text","text":"`)
		fl.bodyUnit = unit
		fl.bodyTail = []byte(`"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`)
	case f == Anthropic:
		// The arguments are raw JSON in a blocking body, and a JSON
		// string in an input_json_delta.
		fl.open = sseFrame("content_block_start", fmt.Appendf(nil, `{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"toolu_flood","name":%s,"input":{}}}`, next, q(t.FloodCall)))
		fl.open = append(fl.open, sseFrame("content_block_delta", fmt.Appendf(nil, `{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, next, q(floodArgsHead)))...)
		fl.unit = sseFrame("content_block_delta", fmt.Appendf(nil, `{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, next, q(string(unit))))
		fl.bodyHead = []byte(`{"id":` + q(id) + `,"type":"message","role":"assistant","model":` + q(model) + `,"content":[{"type":"tool_use","id":"toolu_flood","name":` + q(t.FloodCall) + `,"input":` + floodArgsHead)
		fl.bodyUnit = unit
		fl.bodyTail = []byte(floodArgsTail + `}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`)
	case t.FloodCall == "":
		fl.open = nil
		fl.unit = sseFrame("", []byte(`{"id":`+q(id)+`,"object":"chat.completion.chunk","created":`+strconv.Itoa(created)+`,"model":`+q(model)+`,"choices":[{"index":0,"delta":{"content":"`+string(unit)+`"},"finish_reason":null}]}`))
		fl.bodyHead = []byte(`{"id":` + q(id) + `,"object":"chat.completion","created":` + strconv.Itoa(created) + `,"model":` + q(model) + `,"choices":[{"index":0,"message":{"role":"assistant","content":"`)
		fl.bodyUnit = unit
		fl.bodyTail = []byte(`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	default:
		// The arguments are a JSON string holding JSON: the flood is
		// escaped twice.
		args := q(string(unit))
		args = args[1 : len(args)-1]
		chunk := func(call string) []byte {
			return sseFrame("", []byte(`{"id":`+q(id)+`,"object":"chat.completion.chunk","created":`+strconv.Itoa(created)+`,"model":`+q(model)+`,"choices":[{"index":0,"delta":{"tool_calls":[`+call+`]},"finish_reason":null}]}`))
		}
		fl.open = chunk(fmt.Sprintf(`{"index":%d,"id":"call_flood","type":"function","function":{"name":%s,"arguments":%s}}`, next, q(t.FloodCall), q(floodArgsHead)))
		fl.unit = chunk(fmt.Sprintf(`{"index":%d,"function":{"arguments":"%s"}}`, next, args))
		head := q(floodArgsHead)
		tail := q(floodArgsTail)
		fl.bodyHead = []byte(`{"id":` + q(id) + `,"object":"chat.completion","created":` + strconv.Itoa(created) + `,"model":` + q(model) + `,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_flood","type":"function","function":{"name":` + q(t.FloodCall) + `,"arguments":` + head[:len(head)-1])
		fl.bodyUnit = []byte(args)
		fl.bodyTail = []byte(tail[1:] + `}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}
	return fl
}

// flood writes an answer made by Turn.Flood: in a stream the turn's
// content, then the flood; in a blocking body the flood as the text or the
// arguments. Past FloodBytes a stream ends cleanly without its finish and
// a blocking body is closed; without FloodBytes both go on until the
// client goes away or the server closes.
func (s *Server) flood(w http.ResponseWriter, r *http.Request, t *Turn, enc *encoded, stream bool) {
	h := w.Header()
	fl := enc.flood
	var head [][]byte
	unit, tail := fl.unit, []byte(nil)
	if stream {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		head = append(append(head, enc.frames[:enc.content]...), fl.open)
	} else {
		h.Set("Content-Type", "application/json")
		head = [][]byte{fl.bodyHead}
		unit, tail = fl.bodyUnit, fl.bodyTail
	}
	w.WriteHeader(http.StatusOK)
	for _, b := range head {
		if _, err := w.Write(b); err != nil {
			return
		}
	}
	rc := http.NewResponseController(w)
	for sent := int64(0); t.FloodBytes <= 0 || sent < t.FloodBytes; sent += int64(len(t.Flood)) {
		if t.EventDelay > 0 {
			rc.Flush()
			if !s.wait(w, r, t.EventDelay) {
				return
			}
		}
		select {
		case <-s.closing:
			abort(w, false)
			return
		default:
		}
		if _, err := w.Write(unit); err != nil {
			return // the client went away
		}
	}
	w.Write(tail)
}
