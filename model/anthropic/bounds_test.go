package anthropic_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/anthropic"
	"github.com/loomkit/loom/model/modeltest"
)

// Every content block counts as a part, empty ones and ones of types
// loom does not keep included: a stream of empty blocks cannot pile up
// parts under the byte bound.
func TestEveryBlockIsAPart(t *testing.T) {
	var b strings.Builder
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n")
	for i := range 20 {
		block := `{"type":"thinking","thinking":"","signature":""}`
		if i%2 == 1 {
			block = `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}`
		}
		fmt.Fprintf(&b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":%s}\n\n", i, block)
		fmt.Fprintf(&b, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":%d}\n\n", i)
	}
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	for _, c := range []struct {
		max int
		ok  bool
	}{{20, true}, {19, false}} {
		srv := start(t, loomtest.RawStream(b.String()))
		m := newModel(srv, anthropic.Config{MaxParts: c.max})
		_, _, err := modeltest.StreamCall(context.Background(), m, llm.Request{Messages: []llm.Message{llm.UserText("hi")}})
		if c.ok != (err == nil) || !c.ok && model.KindOf(err) != model.KindAnswerTooLarge {
			t.Errorf("MaxParts %d: err = %v", c.max, err)
		}
	}
}
