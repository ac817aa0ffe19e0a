package temporal

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/loomkit/loom/internal/testimage"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/tool"
)

// A tool result's images travel through the tool activity's output and
// the transcript to the next model call, as they do in process; a long
// text goes by reference and comes back beside them.
func TestToolResultImagesReachTheModel(t *testing.T) {
	png := append(testimage.Make("png", 1, 1), bytes.Repeat([]byte{7}, 3000)...)
	text := strings.Repeat("pixels ", 2*minContentRef)
	shot := tool.Func("shot", "Takes a screenshot.", func(context.Context, struct{}) (llm.ToolResult, error) {
		return llm.ToolResult{Content: text, Images: []llm.Image{{Data: png, MediaType: "image/png"}, {URL: "https://example.com/b.png"}}}, nil
	}, &tool.FuncOptions[struct{}]{Effect: llm.EffectReadOnly})
	tools := mustSet(t, shot)
	turns := func() []modeltest.Turn {
		return []modeltest.Turn{modeltest.ToolCalls(modeltest.Call("c1", "shot", `{}`)), modeltest.Text("a login page")}
	}
	script := modeltest.NewScript(turns()...)
	store := &sharedBlobs{}
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: tools, Blobs: store}
	in := Input{Model: "m", Tools: []string{"shot"}, Run: run.Config{Prompt: llm.UserText("look"), MaxTurns: run.Turns(3)}}
	resp, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, in)
	if err != nil {
		t.Fatal(err)
	}
	// The result names the large image by reference; the workers' store
	// gives it back.
	if rs := resp.Messages[2].ToolResults(); len(rs) != 1 || len(rs[0].Images) != 2 || !strings.HasPrefix(rs[0].Images[0].URL, ImageRefPrefix) || rs[0].Images[0].Data != nil {
		t.Fatalf("the result's images are not references: %+v", rs)
	}
	if resp.Messages, err = ResolveImages(t.Context(), store, resp.Messages); err != nil {
		t.Fatal(err)
	}
	ref := modeltest.NewScript(turns()...)
	want, err := inProcess(t, ref, tools, in.Tools, in.Run, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameResponse(t, want, resp)
	reqs := script.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls", len(reqs))
	}
	sameMessages(t, "messages of the second call", ref.Requests()[1].Messages, reqs[1].Messages)
	rs := reqs[1].Messages[len(reqs[1].Messages)-1].ToolResults()
	if len(rs) != 1 || rs[0].Content != text || len(rs[0].Images) != 2 || !bytes.Equal(rs[0].Images[0].Data, png) || rs[0].Images[1].URL != "https://example.com/b.png" {
		t.Fatalf("the model got %d results; images %+v", len(rs), rs)
	}
}

// The size of a result counts its images, so that Options.ResultBytes
// and the message pages see them.
func TestPartSizeCountsImages(t *testing.T) {
	plain := llm.ToolResult{CallID: "c", Content: "x"}
	withImage := plain
	withImage.Images = []llm.Image{{Data: make([]byte, 3000), MediaType: "image/png"}}
	if d := partSize(withImage) - partSize(plain); d < 4000 {
		t.Fatalf("an image of 3000 bytes adds %d to the size", d)
	}
}
