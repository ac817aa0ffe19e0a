package temporal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/activity"

	"github.com/loomkit/loom/llm"
)

// Images by reference.
//
// An image's bytes would travel in every payload that holds its message:
// the tool activity's result, then the input of the model call that
// follows (and the final result). Temporal limits a payload to 2 MB and a
// history to 50 MB, so the tool activity keeps the data of a result's
// images in the workers' Blobs store and returns, in their place, images
// whose URL names the blob (ImageRefPrefix and the data's BlobKey) and
// whose MediaType is the original's. The model activity puts the bytes
// back (ResolveImages) before it calls the model, so models only ever see
// bytes and a media type. The workflow never reads an image: a reference
// is plain data to it.

// ImageRefPrefix starts the URL of an image kept in a Blobs store:
// "loom-blob:" followed by the BlobKey of the image's data, as in
// "loom-blob:sha256-<64 hex digits>". Such an image carries its media type
// and no data; ResolveImages turns it back into data and media type.
const ImageRefPrefix = "loom-blob:"

// minImageRef is the smallest image data the tool activity sends by
// reference; smaller images cost less inline than their reference.
const minImageRef = 512

// isImageRef reports whether img is a reference to a blob.
func isImageRef(img llm.Image) bool { return strings.HasPrefix(img.URL, ImageRefPrefix) }

// imageRefKey returns the blob key of a reference, or an *InputError when
// the reference is not ImageRefPrefix followed by a key BlobKey could have
// made.
func imageRefKey(url string) (string, error) {
	key := strings.TrimPrefix(url, ImageRefPrefix)
	if err := checkKey(key); err != nil {
		return "", &InputError{Field: "image", Reason: fmt.Sprintf("malformed image reference %.100q: want %q followed by \"sha256-\" and 64 lower-case hex digits", url, ImageRefPrefix)}
	}
	return key, nil
}

// StoreImage puts img's data into store and returns the image that refers
// to it: URL ImageRefPrefix + BlobKey(data), the same MediaType, no data.
// Pass such images in Input (a prompt's pictures) to keep them out of the
// workflow's history; the model activity resolves them with the workers'
// store, which must be store or share its content. An image without data
// (a URL, or a reference already) is returned as it is. An image with data
// and no media type, or with data and a URL, is an *InputError: the
// reference could not give it back as it was.
func StoreImage(ctx context.Context, store Blobs, img llm.Image) (llm.Image, error) {
	if len(img.Data) == 0 {
		return img, nil
	}
	switch {
	case img.MediaType == "":
		return img, &InputError{Field: "image", Reason: "it has data but no media type"}
	case img.URL != "":
		return img, &InputError{Field: "image", Reason: fmt.Sprintf("it has both data and the URL %.100q; give one of them", img.URL)}
	}
	key := BlobKey(img.Data)
	if err := store.Put(ctx, key, img.Data); err != nil {
		return img, fmt.Errorf("temporal: storing an image: %w", err)
	}
	return llm.Image{URL: ImageRefPrefix + key, MediaType: img.MediaType}, nil
}

// ResolveImages returns msgs with every image reference (an image whose
// URL starts with ImageRefPrefix, as a part or among a tool result's
// Images) replaced by the data store holds under it and the reference's
// media type. Messages without references are returned as they are;
// msgs itself is not modified. Use it on the messages of Handle.Result
// (or of events) with the workers' store to get the images' bytes.
//
// A malformed reference is an *InputError; a reference to a blob the
// store lacks is a *StoreError.
func ResolveImages(ctx context.Context, store Blobs, msgs []llm.Message) ([]llm.Message, error) {
	return resolveImages(ctx, store.Get, msgs)
}

// resolveImages is ResolveImages reading blobs with get.
func resolveImages(ctx context.Context, get func(context.Context, string) ([]byte, error), msgs []llm.Message) ([]llm.Message, error) {
	var out []llm.Message
	for i, m := range msgs {
		if !hasImageRef(m) {
			continue
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		m.Parts = slices.Clone(m.Parts)
		for j, p := range m.Parts {
			var err error
			switch p := p.(type) {
			case llm.Image:
				m.Parts[j], err = resolveImage(ctx, get, p)
			case llm.ToolResult:
				if slices.ContainsFunc(p.Images, isImageRef) {
					p.Images = slices.Clone(p.Images)
					for k, img := range p.Images {
						if p.Images[k], err = resolveImage(ctx, get, img); err != nil {
							break
						}
					}
					m.Parts[j] = p
				}
			}
			if err != nil {
				return nil, imageError(err, i, j)
			}
		}
		out[i] = m
	}
	if out == nil {
		return msgs, nil
	}
	return out, nil
}

// imageError says where in the messages the image of err is.
func imageError(err error, msg, part int) error {
	var ie *InputError
	if errors.As(err, &ie) {
		return &InputError{Field: fmt.Sprintf("message %d part %d", msg, part), Reason: ie.Reason}
	}
	var se *StoreError
	if errors.As(err, &se) {
		return &StoreError{Reason: fmt.Sprintf("message %d part %d: %s", msg, part, se.Reason)}
	}
	return fmt.Errorf("temporal: image of message %d part %d: %w", msg, part, err)
}

// hasImageRef reports whether m holds an image reference.
func hasImageRef(m llm.Message) bool {
	for _, p := range m.Parts {
		switch p := p.(type) {
		case llm.Image:
			if isImageRef(p) {
				return true
			}
		case llm.ToolResult:
			if slices.ContainsFunc(p.Images, isImageRef) {
				return true
			}
		}
	}
	return false
}

// resolveImage returns the image img refers to; img itself when it is
// not a reference.
func resolveImage(ctx context.Context, get func(context.Context, string) ([]byte, error), img llm.Image) (llm.Image, error) {
	if !isImageRef(img) {
		return img, nil
	}
	key, err := imageRefKey(img.URL)
	if err != nil {
		return img, err
	}
	data, err := get(ctx, key)
	if errors.Is(err, ErrBlobNotFound) {
		return img, &StoreError{Reason: fmt.Sprintf("the image blob %s is not in the worker's blob store (%v)", key, err)}
	}
	if err != nil {
		return img, fmt.Errorf("reading image %s: %w", key, err)
	}
	return llm.Image{Data: data, MediaType: img.MediaType}, nil
}

// refImages returns images with the data of each image of at least
// minImageRef bytes (and no URL, which a reference would lose) stored in
// the worker's store and replaced by a reference. An image the store
// does not take stays inline: the run goes on, only its payloads grow.
// With a MemoryBlobs every image stays inline (see Registry.Blobs).
func (a *activities) refImages(ctx context.Context, images []llm.Image) []llm.Image {
	if !a.imageRefs {
		return images
	}
	var out []llm.Image
	for i, img := range images {
		if len(img.Data) < minImageRef || img.URL != "" {
			continue
		}
		key := BlobKey(img.Data)
		if err := a.res.cache.put(ctx, key, img.Data); err != nil {
			activity.GetLogger(ctx).Warn("an image of a tool result stays inline: the blob store did not take it", "key", key, "error", err)
			continue
		}
		if out == nil {
			out = slices.Clone(images)
		}
		out[i] = llm.Image{URL: ImageRefPrefix + key, MediaType: img.MediaType}
	}
	if out == nil {
		return images
	}
	return out
}

// activityImagesError turns an error of resolving a model call's images
// into the activity's failure: a malformed reference fails the run with an
// *InputError, a missing blob is handled as any missing blob (see
// missingError), anything else (the store failed) is retried.
func activityImagesError(err error) error {
	var ie *InputError
	if errors.As(err, &ie) {
		return appError(ie.Error(), ErrorTypeInput, *ie)
	}
	var se *StoreError
	if errors.As(err, &se) {
		return missingError(fmt.Errorf("%w: %s", errMissing, se.Reason))
	}
	return err
}

// checkImageRefs returns an *InputError for the first malformed image
// reference in msgs, which Input field names.
func checkImageRefs(field string, msgs []llm.Message) error {
	check := func(i, j int, img llm.Image) error {
		if !isImageRef(img) {
			return nil
		}
		if _, err := imageRefKey(img.URL); err != nil {
			var ie *InputError
			errors.As(err, &ie)
			return &InputError{Field: fmt.Sprintf("%s message %d part %d", field, i, j), Reason: ie.Reason}
		}
		return nil
	}
	for i, m := range msgs {
		for j, p := range m.Parts {
			switch p := p.(type) {
			case llm.Image:
				if err := check(i, j, p); err != nil {
					return err
				}
			case llm.ToolResult:
				for _, img := range p.Images {
					if err := check(i, j, img); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}
