package temporal

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/loomkit/loom/internal/testimage"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
)

// historyStats returns the number of events of a workflow run's history,
// their total size and the size of the largest.
func historyStats(t *testing.T, c client.Client, id, runID string) (events, size, largest int) {
	t.Helper()
	for _, h := range runHistories(t, c, id, runID) {
		for _, e := range h.Events {
			n := proto.Size(e)
			events++
			size += n
			largest = max(largest, n)
		}
	}
	return events, size, largest
}

// TestLargeToolResultImages on a real server: a tool returns 3.9 MB of
// images (1.5 MB and 3 × 800 KB) in one result; the run completes, the
// model gets every byte, and the server's history stays small. The
// control run keeps one 1.5 MB image inline (its store fails to take
// it), as before images went by reference: the server refuses the tool
// activity's result, so the model never sees the image.
func TestServerLargeToolResultImages(t *testing.T) {
	c := serverClient(t)
	ctx := testContext(t, 2*time.Minute)
	images := bigImages()

	queue := queueName(t)
	blobs, err := NewDirBlobs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	script := modeltest.NewScript(imageTurns()...)
	startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": script}, Tools: mustSet(t, imageTool(images)), Blobs: blobs})
	wr, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, WorkflowName, imageInput())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := Attach(c, wr.GetID()).Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Output != "four pictures" {
		t.Fatalf("output %q", resp.Output)
	}
	sameImages(t, "the images the model got", lastResults(t, script)[0].Images, images)
	msgs, err := ResolveImages(ctx, blobs, resp.Messages)
	if err != nil {
		t.Fatal(err)
	}
	sameImages(t, "the result's images resolved", msgs[2].ToolResults()[0].Images, images)
	events, size, largest := historyStats(t, c, wr.GetID(), wr.GetRunID())
	t.Logf("by reference: %d events, %d bytes of history, largest event %d bytes", events, size, largest)
	if largest > 16<<10 || size > 64<<10 {
		t.Errorf("history of %d bytes, largest event %d bytes: the images are in it", size, largest)
	}

	// The control: one 1.5 MB image inline.
	queue = queueName(t)
	one := images[:1]
	refusing := &refusingBlobs{refuse: map[string]bool{BlobKey(one[0].Data): true}}
	script = modeltest.NewScript(imageTurns()...)
	startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": script}, Tools: mustSet(t, imageTool(one)), Blobs: refusing})
	in := imageInput()
	in.Options.ToolRetry.MaximumAttempts = 2
	wr, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, WorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = Attach(c, wr.GetID()).Result(ctx)
	events, size, largest = historyStats(t, c, wr.GetID(), wr.GetRunID())
	t.Logf("inline control: error %v; %d events, %d bytes of history, largest event %d bytes", err, events, size, largest)
	if err != nil {
		return // the run failed: the inline image did not get through
	}
	reqs := script.Requests()
	if len(reqs) < 2 {
		t.Fatalf("the control run ended after %d model calls", len(reqs))
	}
	last := reqs[len(reqs)-1].Messages
	rs := last[len(last)-1].ToolResults()
	if len(rs) == 1 && len(rs[0].Images) == 1 && bytes.Equal(rs[0].Images[0].Data, one[0].Data) {
		t.Fatalf("the 1.5 MB image went inline through the server (largest event %d bytes): the control shows nothing", largest)
	}
	if len(rs) != 1 || !rs[0].IsError {
		t.Fatalf("the control's tool result: %+v", rs)
	}
	t.Logf("inline control: the call was answered %q", rs[0].Content)
}

// TestServerRecordImageHistories writes the replay histories of runs
// whose tool results hold images (testdata/replay/tool-images*.json): one
// by reference (a large image, and a small one that stays inline), one
// with the large image inline, the shape of histories recorded before
// images went by reference. It runs only with LOOM_RECORD_HISTORY=1, as
// TestServerRecordHistories does.
func TestServerRecordImageHistories(t *testing.T) {
	if os.Getenv("LOOM_RECORD_HISTORY") != "1" {
		t.Skip("set LOOM_RECORD_HISTORY=1 (with a server) to record the histories in testdata/replay")
	}
	c := serverClient(t)
	ctx := testContext(t, time.Minute)
	large := llm.Image{Data: append(testimage.Make("png", 1, 1), bytes.Repeat([]byte("\x89PNG"), 600)...), MediaType: "image/png"}
	small := llm.Image{Data: testimage.Make("gif", 1, 1), MediaType: "image/gif"}
	for _, tc := range []struct {
		name  string
		store Blobs
	}{
		{"tool-images", &sharedBlobs{}},
		{"tool-images-inline", &refusingBlobs{refuse: map[string]bool{BlobKey(large.Data): true}}},
	} {
		queue := queueName(t)
		script := modeltest.NewScript(imageTurns()...)
		startWorker(t, c, queue, Registry{Models: map[string]model.Model{"m": script}, Tools: mustSet(t, imageTool([]llm.Image{large, small})), Blobs: tc.store})
		wr, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, WorkflowName, imageInput())
		if err != nil {
			t.Fatal(err)
		}
		resp, err := Attach(c, wr.GetID()).Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		img := resp.Messages[2].ToolResults()[0].Images[0]
		if ref := strings.HasPrefix(img.URL, ImageRefPrefix); ref != (tc.name == "tool-images") {
			t.Fatalf("%s: the large image is %q with %d bytes", tc.name, img.URL, len(img.Data))
		}
		writeHistories(t, c, tc.name, wr.GetID(), wr.GetRunID())
	}
}
