package wire

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loomkit/loom/internal/imageinfo"
	"github.com/loomkit/loom/llm"
)

// ImageLimits are a provider's bounds on the images of one request.
type ImageLimits struct {
	MaxImages  int // images in a request
	ManyImages int // past this many images, sides are bounded by ManySide
	ManySide   int // pixels
	MaxBase64  int // bytes of base64 of all images with data
}

// OmittedImage stands, in a request, for an image left out to keep the
// request within the provider's limits.
const OmittedImage = "[an image of an earlier turn is left out of this request: the request would exceed the API's limits on images]"

// imageAt locates one image of a history.
type imageAt struct {
	msg, part int
	idx       int // index in a tool result's Images; -1 for an image part
	b64       int // base64 bytes; 0 for an image by URL
	data      []byte
}

// FitImages returns msgs with the oldest images left out as far as needed
// to keep the request within lim: past MaxImages images the oldest go;
// past MaxBase64 bytes of base64 the oldest with data go; while more than
// ManyImages remain, the oldest with a side over ManySide go. An image
// part left out becomes a text part saying so ([OmittedImage]); an image
// of a tool result is taken out of its Images and a line saying so is
// added to its content. The history keeps every image: only this request
// goes without. msgs is returned as it is, without copying, when it fits;
// it is never modified. omitted counts the images left out.
func FitImages(msgs []llm.Message, lim ImageLimits) (out []llm.Message, omitted int) {
	var all []imageAt
	total := 0
	for i, m := range msgs {
		for j, p := range m.Parts {
			switch p := p.(type) {
			case llm.Image:
				all = append(all, at(i, j, -1, p))
			case llm.ToolResult:
				for k, img := range p.Images {
					all = append(all, at(i, j, k, img))
				}
			}
		}
	}
	for _, a := range all {
		total += a.b64
	}
	count := len(all)
	if count <= lim.ManyImages && total <= lim.MaxBase64 {
		return msgs, 0
	}
	drop := make([]bool, len(all))
	for i := 0; count > lim.MaxImages; i++ {
		drop[i], count, total = true, count-1, total-all[i].b64
	}
	for i := 0; total > lim.MaxBase64 && i < len(all); i++ {
		if !drop[i] && all[i].b64 > 0 {
			drop[i], count, total = true, count-1, total-all[i].b64
		}
	}
	for i := 0; count > lim.ManyImages && i < len(all); i++ {
		if !drop[i] && maxSide(all[i].data) > lim.ManySide {
			drop[i], count = true, count-1
		}
	}
	if !slices.Contains(drop, true) {
		return msgs, 0
	}
	return omit(msgs, all, drop), len(all) - count
}

func at(msg, part, idx int, img llm.Image) imageAt {
	return imageAt{msg: msg, part: part, idx: idx, b64: (len(img.Data) + 2) / 3 * 4, data: img.Data}
}

// maxSide returns the longer side of an image's data in pixels, 0 when
// unknown (an image by URL, or a header that does not decode: the
// provider judges those).
func maxSide(data []byte) int {
	if len(data) == 0 {
		return 0
	}
	w, h, _, err := imageinfo.Size(data)
	if err != nil {
		return 0
	}
	return max(w, h)
}

// omit returns a copy of msgs without the images marked in drop; the
// messages and parts it does not touch are shared.
func omit(msgs []llm.Message, all []imageAt, drop []bool) []llm.Message {
	out := slices.Clone(msgs)
	copied := map[int]bool{}
	results := map[[2]int][]string{} // notes per tool result
	keep := map[[2]int][]llm.Image{}
	for n, a := range all {
		if !copied[a.msg] {
			out[a.msg].Parts = slices.Clone(msgs[a.msg].Parts)
			copied[a.msg] = true
		}
		key := [2]int{a.msg, a.part}
		if a.idx < 0 {
			if drop[n] {
				out[a.msg].Parts[a.part] = llm.Text{Text: OmittedImage}
			}
			continue
		}
		r := msgs[a.msg].Parts[a.part].(llm.ToolResult)
		if drop[n] {
			results[key] = append(results[key], fmt.Sprintf("[image %d of this result is left out of this request: the request would exceed the API's limits on images]", a.idx+1))
		} else {
			keep[key] = append(keep[key], r.Images[a.idx])
		}
	}
	for key, notes := range results {
		r := msgs[key[0]].Parts[key[1]].(llm.ToolResult)
		r.Images = keep[key]
		if r.Content != "" {
			notes = slices.Insert(notes, 0, r.Content)
		}
		r.Content = strings.Join(notes, "\n")
		out[key[0]].Parts[key[1]] = r
	}
	return out
}
