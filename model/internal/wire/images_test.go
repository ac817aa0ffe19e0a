package wire

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/loomkit/loom/internal/testimage"
	"github.com/loomkit/loom/llm"
)

var testLimits = ImageLimits{MaxImages: 10, ManyImages: 4, ManySide: 100, MaxBase64: 4000}

// history makes a user message per image: an image part for even i, a
// tool result holding the image for odd i (with its call before it).
func history(images ...llm.Image) []llm.Message {
	var msgs []llm.Message
	for i, img := range images {
		if i%2 == 0 {
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text{Text: fmt.Sprint("look ", i)}, img}})
			continue
		}
		id := fmt.Sprint("c", i)
		msgs = append(msgs,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: id, Name: "shot", Arguments: `{}`}}},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: id, Name: "shot", Content: "shot", Images: []llm.Image{img}}}})
	}
	return msgs
}

func png(w, h int) llm.Image {
	return llm.Image{Data: testimage.Make("png", w, h), MediaType: "image/png"}
}

// sent lists, in order, whether each image of the original history is
// still in out (true) or was left out with its note (false).
func sent(t *testing.T, out []llm.Message) []bool {
	t.Helper()
	var kept []bool
	for _, m := range out {
		for _, p := range m.Parts {
			switch p := p.(type) {
			case llm.Image:
				kept = append(kept, true)
			case llm.Text:
				if p.Text == OmittedImage {
					kept = append(kept, false)
				}
			case llm.ToolResult:
				if len(p.Images) == 1 && p.Content == "shot" {
					kept = append(kept, true)
				} else if len(p.Images) == 0 && p.Content == "shot\n[image 1 of this result is left out of this request: the request would exceed the API's limits on images]" {
					kept = append(kept, false)
				} else {
					t.Fatalf("result %+v", p)
				}
			}
		}
	}
	return kept
}

func TestFitImagesWithinTheLimits(t *testing.T) {
	msgs := history(png(500, 500), png(1, 1), png(1, 1), png(1, 1))
	out, n := FitImages(msgs, testLimits)
	if n != 0 || &out[0] != &msgs[0] {
		t.Fatalf("a history within the limits was changed or copied (%d left out)", n)
	}
}

func TestFitImages(t *testing.T) {
	small := png(1, 1)
	big := png(101, 1)
	byURL := llm.Image{URL: "https://example.com/a.png"}
	heavy := llm.Image{Data: append(testimage.Make("png", 1, 1), make([]byte, 1500)...), MediaType: "image/png"} // over 2 KB of base64: two pass MaxBase64
	cases := []struct {
		name   string
		images []llm.Image
		want   []bool
	}{
		{"too many: the oldest go", []llm.Image{byURL, small, small, byURL, small, small, small, small, small, small, small, small},
			[]bool{false, false, true, true, true, true, true, true, true, true, true, true}},
		{"many: the oldest large go, until few are left", []llm.Image{big, small, big, small, big, small},
			[]bool{false, true, false, true, true, true}},
		{"many: large ones stay when the count allows", []llm.Image{small, big, small, small, small},
			[]bool{true, false, true, true, true}},
		{"many, none large: all stay", []llm.Image{small, small, small, small, small, small, byURL},
			[]bool{true, true, true, true, true, true, true}},
		{"too heavy: the oldest with data go", []llm.Image{heavy, byURL, heavy, heavy},
			[]bool{false, true, false, true}},
	}
	for _, c := range cases {
		msgs := history(c.images...)
		before := len(msgs)
		snapshot := fmt.Sprintf("%#v", msgs)
		out, n := FitImages(msgs, testLimits)
		got := sent(t, out)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: kept %v, want %v", c.name, got, c.want)
		}
		left := 0
		for _, k := range c.want {
			if !k {
				left++
			}
		}
		if n != left {
			t.Errorf("%s: %d said left out, want %d", c.name, n, left)
		}
		if len(msgs) != before || fmt.Sprintf("%#v", msgs) != snapshot {
			t.Errorf("%s: the history was modified", c.name)
		}
		if err := llm.CheckHistory(out); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// A tool result keeps its other images and its text; only the omitted
// one is replaced by a line.
func TestFitImagesInOneResult(t *testing.T) {
	msgs := []llm.Message{
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "c", Name: "shots", Arguments: `{}`}}},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "c", Name: "shots", Content: "three", Images: []llm.Image{png(200, 1), png(2, 2), png(3, 3), png(4, 4), png(5, 5)}}}},
	}
	out, n := FitImages(msgs, testLimits)
	r := out[1].Parts[0].(llm.ToolResult)
	if n != 1 || len(r.Images) != 4 || !strings.HasPrefix(r.Content, "three\n[image 1 of this result is left out") {
		t.Fatalf("%d left out; result %q with %d images", n, r.Content, len(r.Images))
	}
	if len(msgs[1].Parts[0].(llm.ToolResult).Images) != 5 {
		t.Fatal("the history's result lost an image")
	}
}

// Whatever the images of a history, the request keeps within the limits
// as far as its images allow, leaves the history as it was, and counts
// what it left out.
func FuzzFitImages(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{200, 201, 202, 3, 204, 5, 206})
	f.Add([]byte{})
	pool := []llm.Image{
		png(1, 1), png(101, 3), png(3, 150),
		{URL: "https://example.com/a.png"},
		{Data: append(testimage.Make("png", 2, 2), make([]byte, 1500)...), MediaType: "image/png"},
		{Data: []byte("not decodable"), MediaType: "image/png"},
	}
	f.Fuzz(func(t *testing.T, picks []byte) {
		if len(picks) > 40 {
			picks = picks[:40]
		}
		var images []llm.Image
		for _, p := range picks {
			images = append(images, pool[int(p)%len(pool)])
		}
		msgs := history(images...)
		snapshot := fmt.Sprintf("%#v", msgs)
		out, n := FitImages(msgs, testLimits)
		if fmt.Sprintf("%#v", msgs) != snapshot {
			t.Fatal("the history was modified")
		}
		if err := llm.CheckHistory(out); err != nil {
			t.Fatal(err)
		}
		var kept []llm.Image
		for _, m := range out {
			for _, p := range m.Parts {
				switch p := p.(type) {
				case llm.Image:
					kept = append(kept, p)
				case llm.ToolResult:
					kept = append(kept, p.Images...)
				}
			}
		}
		if len(kept)+n != len(images) {
			t.Fatalf("%d kept + %d left out != %d", len(kept), n, len(images))
		}
		total, large := 0, false
		for _, img := range kept {
			total += (len(img.Data) + 2) / 3 * 4
			large = large || maxSide(img.Data) > testLimits.ManySide
		}
		if len(kept) > testLimits.MaxImages || total > testLimits.MaxBase64 || (len(kept) > testLimits.ManyImages && large) {
			t.Fatalf("%d images, %d bytes of base64, a large one %v: past the limits", len(kept), total, large)
		}
	})
}
