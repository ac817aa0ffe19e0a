package web

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHTMLText(t *testing.T) {
	base, _ := url.Parse("https://example.com/docs/")
	doc := `<!DOCTYPE html><html><head><title>The &amp; Title</title><style>body{color:red}</style>
<meta name="description" content="hidden"><script src="x.js"></script></head>
<body><nav><a href="/">Home</a> | <a href="guide">Guide</a></nav>
<h2>Install   now</h2>
<p>Run <code>go get</code> and   then<br>restart.</p>
<ul><li>one</li><li>two <b>bold</b></li></ul>
<pre>  indented
    more</pre>
<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>
<p><img src="x.png" alt="A cat">text <a href="javascript:void(0)">js</a> <a href="#top">top</a> <a href="mailto:x@y">mail</a></p>
<script>var x = "<p>not text</p>";</script><noscript>enable js</noscript><template><p>tpl</p></template>
<svg><text>vector</text></svg>
<p>caf&eacute; &lt;tag&gt; &#x1F600;</p><a href="/empty"></a>
</body></html>`
	want := `# The & Title

[Home](https://example.com/) | [Guide](https://example.com/docs/guide)

## Install now

Run go get and then
restart.

- one
- two bold

  indented
    more

| a | b |
| 1 | 2 |

[image: A cat] text js top mail

café <tag> 😀
`
	if got := HTMLText([]byte(doc), base); got != want {
		t.Errorf("HTMLText:\n%s\nwant:\n%s\n(%q)", got, want, got)
	}
}

func TestHTMLTextBroken(t *testing.T) {
	for _, doc := range []string{
		"", "<", "<p>unclosed", "<script>never closed <p>hidden", "</p></div></a>text",
		"<a href='x'>link<div>block</div></a>", "\xff\xfe<p>bad utf8 \xc3</p>", strings.Repeat("<div>", 10000) + "deep",
	} {
		got := HTMLText([]byte(doc), nil)
		if !utf8.ValidString(got) {
			t.Errorf("HTMLText(%.40q) = %q: not valid UTF-8", doc, got)
		}
		if strings.Contains(doc, "hidden") && strings.Contains(got, "hidden") {
			t.Errorf("HTMLText(%.40q) = %q: script text shown", doc, got)
		}
	}
	if got := HTMLText([]byte(strings.Repeat("<div>", 10000)+"deep"), nil); strings.TrimSpace(got) != "deep" {
		t.Errorf("deep nesting: %q", got)
	}
}

func FuzzHTMLText(f *testing.F) {
	f.Add("<p>hello <a href='/x'>x</a></p>")
	f.Add("<pre>a\n\n b</pre><script>x</script>")
	f.Add("<table><tr><td>1</td></tr></table>")
	f.Fuzz(func(t *testing.T, doc string) {
		base, _ := url.Parse("https://example.com/")
		got := HTMLText([]byte(doc), base)
		if !utf8.ValidString(got) || !strings.HasSuffix(got, "\n") {
			t.Fatalf("HTMLText(%q) = %q: not valid UTF-8", doc, got)
		}
	})
}

func BenchmarkHTMLText(b *testing.B) {
	page := []byte(strings.Repeat(`<div class="x"><h2>Title</h2><p>Some <a href="/a">linked</a> text &amp; more words here.</p><ul><li>item</li></ul><script>var x=1;</script></div>`, 2000))
	base, _ := url.Parse("https://example.com/")
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		HTMLText(page, base)
	}
}
