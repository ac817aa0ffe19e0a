package temporal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/internal/testimage"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/tool"
)

// bigImages returns an image of 1.5 MB and three of 800 KB, each of
// different random bytes after a PNG header: together twice Temporal's payload limit.
func bigImages() []llm.Image {
	sizes := []int{1536 << 10, 800 << 10, 800 << 10, 800 << 10}
	r := rand.NewChaCha8([32]byte{'i', 'm', 'g'})
	out := make([]llm.Image, len(sizes))
	for i, n := range sizes {
		head := testimage.Make("png", 1+i, 1) // decodes as far as its size
		data := make([]byte, n)
		_, _ = r.Read(data[copy(data, head):])
		out[i] = llm.Image{Data: data, MediaType: "image/png"}
	}
	return out
}

// imageTool returns a read-only tool "shot" whose result holds images.
func imageTool(images []llm.Image) tool.Tool {
	return tool.Func("shot", "Takes screenshots.", func(context.Context, struct{}) (llm.ToolResult, error) {
		return llm.ToolResult{Content: fmt.Sprintf("%d screenshots", len(images)), Images: images}, nil
	}, &tool.FuncOptions[struct{}]{Effect: llm.EffectReadOnly})
}

func imageTurns() []modeltest.Turn {
	return []modeltest.Turn{modeltest.ToolCalls(modeltest.Call("c1", "shot", `{}`)), modeltest.Text("four pictures")}
}

// imageInput starts a run of imageTurns. Heartbeats allow for megabytes
// of JSON under the race detector.
func imageInput() Input {
	opts := fastOptions()
	opts.ModelHeartbeat, opts.ToolHeartbeat = time.Minute, time.Minute
	return Input{Model: "m", Tools: []string{"shot"}, Run: run.Config{Prompt: llm.UserText("look"), MaxTurns: run.Turns(3)}, Options: opts}
}

// sameImages fails unless got holds exactly want's bytes and media types.
func sameImages(t testing.TB, what string, got, want []llm.Image) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d images, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.URL != w.URL || g.MediaType != w.MediaType || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("%s: image %d is %q %q with %d bytes (equal: %v), want %q %q with %d bytes", what, i, g.URL, g.MediaType, len(g.Data), bytes.Equal(g.Data, w.Data), w.URL, w.MediaType, len(w.Data))
		}
	}
}

// lastResults returns the tool results of the last message the model got
// in its second call.
func lastResults(t testing.TB, script *modeltest.Script) []llm.ToolResult {
	t.Helper()
	reqs := script.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	msgs := reqs[1].Messages
	rs := msgs[len(msgs)-1].ToolResults()
	if len(rs) != 1 {
		t.Fatalf("the last message holds %d tool results", len(rs))
	}
	return rs
}

// sharedBlobs stands for a store shared by the workers: images go by
// reference to it, as they do not to a MemoryBlobs.
type sharedBlobs struct{ MemoryBlobs }

// refusingBlobs is a MemoryBlobs that fails to store the keys in refuse.
type refusingBlobs struct {
	MemoryBlobs
	refuse map[string]bool
}

func (b *refusingBlobs) Put(ctx context.Context, key string, data []byte) error {
	if b.refuse[key] {
		return errors.New("the store is full")
	}
	return b.MemoryBlobs.Put(ctx, key, data)
}

// A tool returns 3.9 MB of images (1.5 MB and 3 × 800 KB) in one result.
// The images go by reference: the run completes, no payload the workflow
// or an activity makes (inputs and results) passes 16 KB, and the model
// gets every image byte for byte. The control run, whose store fails to
// take its one 1.5 MB image, keeps it inline: it too completes (the test
// environment does not enforce the limit) but its largest payload passes
// 2 MB, which is what a server refuses.
func TestLargeToolResultImages(t *testing.T) {
	images := bigImages()
	runImages := func(t *testing.T, images []llm.Image, store Blobs) (run.Response, *modeltest.Script, *sizeRecorder) {
		script := modeltest.NewScript(imageTurns()...)
		reg := Registry{Models: map[string]model.Model{"m": script}, Tools: mustSet(t, imageTool(images)), Blobs: store}
		rec := newSizeRecorder()
		resp, err, _ := execute(t, func() *testsuiteEnv {
			env := newEnv(t, reg)
			env.SetDataConverter(rec)
			return env
		}, imageInput())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Output != "four pictures" {
			t.Fatalf("output %q", resp.Output)
		}
		sameImages(t, "the images the model got", lastResults(t, script)[0].Images, images)
		return resp, script, rec
	}

	t.Run("by reference", func(t *testing.T) {
		store := &sharedBlobs{}
		resp, _, rec := runImages(t, images, store)
		largest, total, count := rec.stats()
		t.Logf("by reference: largest payload %d bytes; %d payloads, %d bytes in all", largest, count, total)
		if largest > 16<<10 {
			t.Errorf("the largest payload is %d bytes, over 16 KB", largest)
		}
		if total > 64<<10 {
			t.Errorf("the payloads hold %d bytes, over 64 KB", total)
		}
		for _, img := range resp.Messages[2].ToolResults()[0].Images {
			if !strings.HasPrefix(img.URL, ImageRefPrefix) || img.Data != nil || img.MediaType != "image/png" {
				t.Fatalf("an image of the result is not a reference: %q %q, %d bytes", img.URL, img.MediaType, len(img.Data))
			}
		}
		msgs, err := ResolveImages(t.Context(), store, resp.Messages)
		if err != nil {
			t.Fatal(err)
		}
		sameImages(t, "the result's images resolved", msgs[2].ToolResults()[0].Images, images)
	})

	t.Run("inline control", func(t *testing.T) {
		one := images[:1]
		store := &refusingBlobs{refuse: map[string]bool{BlobKey(one[0].Data): true}}
		resp, _, rec := runImages(t, one, store)
		largest, total, count := rec.stats()
		t.Logf("inline: largest payload %d bytes; %d payloads, %d bytes in all", largest, count, total)
		if largest <= 2<<20 {
			t.Errorf("with the images inline the largest payload is %d bytes, not over 2 MB", largest)
		}
		sameImages(t, "the result's inline image", resp.Messages[2].ToolResults()[0].Images, one)
	})
}

// Images under 512 bytes, and images with a URL, stay as they are; the
// others become references with their media type.
func TestToolImagesBelowTheThresholdStayInline(t *testing.T) {
	small := llm.Image{Data: bytes.Repeat([]byte{1}, minImageRef-1), MediaType: "image/gif"}
	atLimit := llm.Image{Data: bytes.Repeat([]byte{2}, minImageRef), MediaType: "image/webp"}
	byURL := llm.Image{URL: "https://example.com/a.png"}
	both := llm.Image{URL: "https://example.com/b.png", Data: bytes.Repeat([]byte{3}, 4096), MediaType: "image/png"}
	store := &sharedBlobs{}
	acts, err := newActivities(Registry{Models: map[string]model.Model{"m": modeltest.NewScript()}, Blobs: store})
	if err != nil {
		t.Fatal(err)
	}
	in := []llm.Image{small, atLimit, byURL, both}
	out := acts.refImages(t.Context(), in)
	sameImages(t, "the input", in, []llm.Image{small, atLimit, byURL, both})
	want := []llm.Image{small, {URL: ImageRefPrefix + BlobKey(atLimit.Data), MediaType: "image/webp"}, byURL, both}
	sameImages(t, "the images sent", out, want)
	if n, _ := store.Len(); n != 1 {
		t.Fatalf("%d blobs stored, want 1", n)
	}
}

// A tool that returns a malformed image reference fails the run with an
// *InputError naming it; the model is not called with it.
func TestMalformedImageRef(t *testing.T) {
	for _, url := range []string{ImageRefPrefix, ImageRefPrefix + "sha256-zz", ImageRefPrefix + "../../etc/passwd", ImageRefPrefix + strings.ToUpper(BlobKey([]byte("x")))} {
		t.Run(fmt.Sprintf("%.20q", strings.TrimPrefix(url, ImageRefPrefix)), func(t *testing.T) {
			script := modeltest.NewScript(imageTurns()...)
			reg := Registry{Models: map[string]model.Model{"m": script}, Tools: mustSet(t, imageTool([]llm.Image{{URL: url, MediaType: "image/png"}}))}
			_, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, imageInput())
			var ie *InputError
			if !errors.Is(err, ErrInput) || !errors.As(err, &ie) {
				t.Fatalf("error %v (%T), want an *InputError", err, err)
			}
			contains(t, "the reason", ie.Reason, "malformed image reference")
			contains(t, "the field", ie.Field, "message 2 part 0")
			if script.Calls() != 1 {
				t.Fatalf("%d model calls, want 1", script.Calls())
			}
		})
	}
}

// A reference to a blob the workers' store lacks fails the run with a
// *StoreError naming the blob; the model is not called with it.
func TestMissingImageBlob(t *testing.T) {
	key := BlobKey([]byte("never stored"))
	script := modeltest.NewScript(imageTurns()...)
	reg := Registry{Models: map[string]model.Model{"m": script}, Tools: mustSet(t, imageTool([]llm.Image{{URL: ImageRefPrefix + key, MediaType: "image/png"}})), Blobs: &MemoryBlobs{}}
	_, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, imageInput())
	var se *StoreError
	if !errors.Is(err, ErrStore) || !errors.As(err, &se) {
		t.Fatalf("error %v (%T), want a *StoreError", err, err)
	}
	contains(t, "the reason", se.Reason, key)
	if script.Calls() != 1 {
		t.Fatalf("%d model calls, want 1", script.Calls())
	}
}

// An input image stored with StoreImage reaches the model as its bytes;
// a malformed reference in the input is refused before anything runs.
func TestInputImagesByReference(t *testing.T) {
	store := &sharedBlobs{}
	img := bigImages()[1]
	ref, err := StoreImage(t.Context(), store, img)
	if err != nil {
		t.Fatal(err)
	}
	if ref.URL != ImageRefPrefix+BlobKey(img.Data) || ref.Data != nil || ref.MediaType != img.MediaType {
		t.Fatalf("StoreImage gave %q %q with %d bytes", ref.URL, ref.MediaType, len(ref.Data))
	}
	script := modeltest.NewScript(modeltest.Text("a picture"))
	reg := Registry{Models: map[string]model.Model{"m": script}, Blobs: store}
	in := Input{Model: "m", Run: run.Config{Prompt: llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text{Text: "what is it?"}, ref}}, MaxTurns: run.Turns(1)}}
	rec := newSizeRecorder()
	if _, err, _ := execute(t, func() *testsuiteEnv { env := newEnv(t, reg); env.SetDataConverter(rec); return env }, in); err != nil {
		t.Fatal(err)
	}
	reqs := script.Requests()
	if len(reqs) != 1 || len(reqs[0].Messages) != 1 || len(reqs[0].Messages[0].Parts) != 2 {
		t.Fatalf("the model got %+v", reqs)
	}
	got, _ := reqs[0].Messages[0].Parts[1].(llm.Image)
	sameImages(t, "the prompt's image", []llm.Image{got}, []llm.Image{img})
	if largest, _, _ := rec.stats(); largest > 8<<10 {
		t.Errorf("the largest payload is %d bytes", largest)
	}

	bad := in
	bad.Run.Prompt = llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text{Text: "x"}, llm.Image{URL: ImageRefPrefix + "sha256-", MediaType: "image/png"}}}
	var ie *InputError
	if err := bad.Validate(); !errors.As(err, &ie) || ie.Field != "Run.Prompt message 0 part 1" {
		t.Fatalf("Validate: %v", err)
	}
	script = modeltest.NewScript(modeltest.Text("a picture"))
	reg.Models["m"] = script
	if _, err, _ := execute(t, func() *testsuiteEnv { return newEnv(t, reg) }, bad); !errors.Is(err, ErrInput) || script.Calls() != 0 {
		t.Fatalf("error %v after %d model calls", err, script.Calls())
	}
}

// StoreImage refuses what a reference could not give back; ResolveImages
// leaves its argument alone and passes on what needs nothing.
func TestStoreAndResolveImages(t *testing.T) {
	ctx := t.Context()
	store := &sharedBlobs{}
	for _, img := range []llm.Image{
		{Data: []byte("png"), MediaType: ""},
		{Data: []byte("png"), MediaType: "image/png", URL: "https://example.com/a.png"},
	} {
		if _, err := StoreImage(ctx, store, img); !errors.Is(err, ErrInput) {
			t.Fatalf("StoreImage(%+v): %v", img, err)
		}
	}
	byURL := llm.Image{URL: "https://example.com/a.png"}
	if got, err := StoreImage(ctx, store, byURL); err != nil || got.URL != byURL.URL || got.Data != nil {
		t.Fatalf("StoreImage of a URL: %+v, %v", got, err)
	}
	if n, _ := store.Len(); n != 0 {
		t.Fatalf("%d blobs stored", n)
	}

	data := []byte("tiny but stored")
	ref, err := StoreImage(ctx, store, llm.Image{Data: data, MediaType: "image/png"})
	if err != nil {
		t.Fatal(err)
	}
	plain := llm.UserText("no images")
	msgs := []llm.Message{plain, {Role: llm.RoleUser, Parts: []llm.Part{ref, llm.ToolResult{CallID: "c", Images: []llm.Image{byURL, ref}}}}}
	before := fmt.Sprintf("%#v", msgs)
	out, err := ResolveImages(ctx, store, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if after := fmt.Sprintf("%#v", msgs); after != before {
		t.Fatalf("ResolveImages changed its argument:\n%s\n%s", before, after)
	}
	want := llm.Image{Data: data, MediaType: "image/png"}
	got, _ := out[1].Parts[0].(llm.Image)
	sameImages(t, "the image part", []llm.Image{got}, []llm.Image{want})
	sameImages(t, "the result's images", out[1].ToolResults()[0].Images, []llm.Image{byURL, want})
	if same, err := ResolveImages(ctx, store, []llm.Message{plain}); err != nil || fmt.Sprint(same) != fmt.Sprint([]llm.Message{plain}) {
		t.Fatalf("messages without references: %v, %v", same, err)
	}

	missing := llm.Image{URL: ImageRefPrefix + BlobKey([]byte("absent")), MediaType: "image/png"}
	if _, err := ResolveImages(ctx, store, []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{missing}}}); !errors.Is(err, ErrStore) {
		t.Fatalf("a missing blob: %v", err)
	}
	if _, err := ResolveImages(ctx, store, []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Image{URL: ImageRefPrefix + "x"}}}}); !errors.Is(err, ErrInput) {
		t.Fatalf("a malformed reference: %v", err)
	}
}

// With the default store, a MemoryBlobs of the worker's process, images
// stay inline: that store loses them with the process and is not shared,
// so it may only be a cache. Any other store takes them by reference.
func TestImagesStayInlineInAMemoryStore(t *testing.T) {
	big := bigImages()[1:2]
	for _, tc := range []struct {
		name  string
		store Blobs
		refs  bool
	}{{"default", nil, false}, {"memory", &MemoryBlobs{}, false}, {"shared", &sharedBlobs{}, true}} {
		acts, err := newActivities(Registry{Models: map[string]model.Model{"m": modeltest.NewScript()}, Blobs: tc.store})
		if err != nil {
			t.Fatal(err)
		}
		out := acts.refImages(t.Context(), big)
		if got := isImageRef(out[0]); got != tc.refs {
			t.Errorf("%s: by reference %v, want %v", tc.name, got, tc.refs)
		}
	}
}
