package runstate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
)

// withResultImages returns the snapshot doc with images added to its
// first tool result.
func withResultImages(t *testing.T, doc []byte, images []any) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	var found bool
	var walk func(any)
	walk = func(n any) {
		switch x := n.(type) {
		case map[string]any:
			if x["type"] == "tool_result" && !found {
				x["images"] = images
				found = true
				return
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	if !found {
		t.Fatal("the snapshot holds no tool result")
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A tool result with images fits the schema of format 1, restores with
// its images and encodes back the same; a member an image does not
// declare, or a tag, is refused by loom and by the schema alike.
func TestToolResultImagesInSnapshots(t *testing.T) {
	doc := read(t, fixture("awaiting_final_call"))
	good := withResultImages(t, doc, []any{
		map[string]any{"data": "iVBORw0KGgo=", "media_type": "image/png"},
		map[string]any{"url": "https://example.com/chart.png"},
	})
	if err := validate(t, schemaSnapshot, good); err != nil {
		t.Fatalf("the schema refuses a result with images: %v", err)
	}
	var r run.Run
	if err := json.Unmarshal(good, &r); err != nil {
		t.Fatalf("loom refuses a result with images: %v", err)
	}
	var imgs []llm.Image
	for _, m := range r.Messages() {
		for _, tr := range m.ToolResults() {
			imgs = append(imgs, tr.Images...)
		}
	}
	if len(imgs) != 2 || string(imgs[0].Data) != "\x89PNG\r\n\x1a\n" || imgs[0].MediaType != "image/png" || imgs[1].URL != "https://example.com/chart.png" {
		t.Fatalf("restored images: %+v", imgs)
	}
	again, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, again, good) {
		t.Errorf("encodes back differently:\n got %s\nwant %s", again, good)
	}

	bad := map[string][]any{
		"unknown member": {map[string]any{"url": "https://x", unknownMember: 1}},
		"tagged image":   {map[string]any{"type": "image", "url": "https://x"}},
		"not base64":     {map[string]any{"data": "!!", "media_type": "image/png"}},
		"not an object":  {"https://x"},
	}
	for name, images := range bad {
		doc := withResultImages(t, doc, images)
		var r run.Run
		if err := json.Unmarshal(doc, &r); !errors.Is(err, run.ErrSnapshot) {
			t.Errorf("%s: loom says %v", name, err)
		}
		if validate(t, schemaSnapshot, doc) == nil {
			t.Errorf("%s: the schema accepts it", name)
		}
	}
	if err := json.Unmarshal(withResultImages(t, doc, []any{map[string]any{"url": "https://x", unknownMember: 1}}), new(run.Run)); err == nil || !strings.Contains(err.Error(), unknownMember) {
		t.Errorf("an unknown member in an image: %v does not name it", err)
	}
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
