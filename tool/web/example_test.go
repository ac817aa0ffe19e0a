package web_test

import (
	"fmt"
	"net/url"

	"github.com/loomkit/loom/tool/web"
)

func ExampleHTMLText() {
	base, _ := url.Parse("https://go.dev/doc/")
	fmt.Print(web.HTMLText([]byte(`<h1>Go</h1><script>track()</script><p>Read <a href="install">the install guide</a>.</p>`), base))
	// Output:
	// # Go
	//
	// Read [the install guide](https://go.dev/doc/install).
}

func ExampleNew() {
	fetch := web.New(nil) // public addresses only; every call needs approval
	fmt.Println(fetch.Spec().Name, fetch.Spec().NeedsApproval)
	// Output: web_fetch true
}
