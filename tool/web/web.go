package web

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

// Args are the arguments of web_fetch.
type Args struct {
	URL string `json:"url" jsonschema:"the http or https URL of a public web page"`
}

// Tool is the web_fetch tool. It implements [tool.Tool] and is safe for
// concurrent use.
type Tool struct {
	*tool.FuncTool[Args, string]
	f     *Fetcher
	calls atomic.Int64 // fetches started, for tests
}

// New returns the web_fetch tool configured by cfg (nil for the defaults).
// Its result is the final URL, the status and the content type, then the
// page as text: HTML turned into readable text (see [HTMLText]), other
// text as it is; binary content is refused. A refused destination, a
// status of 400 or more, a timeout or a network failure is an error
// result saying so.
func New(cfg *Config) *Tool {
	f := NewFetcher(cfg)
	t := &Tool{f: f}
	schema, err := jsonschema.For[Args](nil)
	if err != nil {
		panic(fmt.Sprintf("web: inferring the schema of Args: %v", err)) // a bug in Args
	}
	one := 1
	schema.Properties["url"].MinLength = &one
	t.FuncTool = tool.Func("web_fetch",
		"Fetch a public web page by its http or https URL and return it as text (HTML is turned "+
			"into readable text with links kept). Private, local and cloud-metadata addresses are "+
			"refused, as are URLs with credentials; at most "+fmt.Sprint(f.cfg.MaxRedirects)+" redirects are followed "+
			"and at most "+fmt.Sprint(f.cfg.MaxBytes>>20)+" MB read.",
		t.fetch,
		&tool.FuncOptions[Args]{
			Effect:        llm.EffectReadOnly,
			NeedsApproval: !f.cfg.NoApproval,
			MaxResult:     f.cfg.MaxResult,
			Schema:        schema,
		})
	return t
}

// Fetcher returns the fetcher the tool uses.
func (t *Tool) Fetcher() *Fetcher { return t.f }

func (t *Tool) fetch(ctx context.Context, a Args) (string, error) {
	t.calls.Add(1)
	p, err := t.f.Fetch(ctx, a.URL)
	if err != nil {
		return "", err
	}
	text, err := pageText(p)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\nStatus: %s\n", p.URL, p.Status)
	if p.ContentType != "" {
		fmt.Fprintf(&b, "Content-Type: %s\n", p.ContentType)
	}
	if p.Truncated {
		fmt.Fprintf(&b, "Note: the page is longer than %d bytes; only its start was read.\n", t.f.cfg.MaxBytes)
	}
	b.WriteString("\n")
	b.WriteString(text)
	if p.StatusCode >= 400 {
		return "", fmt.Errorf("the server answered %s\n%s", p.Status, b.String())
	}
	return b.String(), nil
}

// NotTextError is a page whose content is not text (an image, an archive,
// a PDF): web_fetch returns text only.
type NotTextError struct {
	ContentType string
	Size        int
}

func (e *NotTextError) Error() string {
	return fmt.Sprintf("the page is %s (%d bytes read), not text; web_fetch returns text only", e.ContentType, e.Size)
}

// pageText returns the page's body as UTF-8 text.
func pageText(p *Page) (string, error) {
	ct := p.ContentType
	if ct == "" {
		ct = http.DetectContentType(p.Body)
	}
	media, params, err := mime.ParseMediaType(ct)
	if err != nil {
		media = strings.ToLower(strings.TrimSpace(strings.Split(ct, ";")[0]))
	}
	body := decodeCharset(p.Body, params["charset"])
	switch {
	case media == "text/html" || media == "application/xhtml+xml":
		base, _ := url.Parse(p.URL)
		return HTMLText([]byte(body), base), nil
	case strings.HasPrefix(media, "text/") || media == "application/json" || media == "application/xml" ||
		media == "application/javascript" || media == "application/x-javascript" || media == "application/ld+json" ||
		media == "application/x-yaml" || media == "application/yaml" || media == "application/toml" ||
		strings.HasSuffix(media, "+json") || strings.HasSuffix(media, "+xml"):
		return body, nil
	}
	if media == "application/octet-stream" && utf8.Valid(p.Body) && !strings.ContainsRune(body, 0) {
		return body, nil // text served without a type
	}
	return "", &NotTextError{ContentType: media, Size: len(p.Body)}
}

// decodeCharset returns b as UTF-8: Latin-1 and Windows-1252 are
// converted, anything else not UTF-8 has its invalid bytes replaced.
func decodeCharset(b []byte, charset string) string {
	switch strings.ToLower(strings.TrimSpace(charset)) {
	case "iso-8859-1", "latin1", "iso_8859-1", "windows-1252", "cp1252", "us-ascii", "ascii":
		if utf8.Valid(b) && !hasHighBytes(b) {
			return string(b)
		}
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = win1252(c)
		}
		return string(r)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func hasHighBytes(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return true
		}
	}
	return false
}

// win1252 maps a Windows-1252 byte to its rune (a superset of Latin-1 in
// 0x80-0x9F).
func win1252(c byte) rune {
	const table = "€\uFFFD‚ƒ„…†‡ˆ‰Š‹Œ\uFFFDŽ\uFFFD\uFFFD‘’“”•–—˜™š›œ\uFFFDžŸ"
	if c >= 0x80 && c <= 0x9F {
		return []rune(table)[c-0x80]
	}
	return rune(c)
}
