package fs

import (
	"regexp"
	"testing"
)

func TestPrefilter(t *testing.T) {
	cases := map[string]string{ // pattern -> required literal, "" for none
		`(?m)^\t\w+ .*NEEDLE h[a-z]+$`: "NEEDLE h",
		`(?m)func \w+Handler`:          "Handler",
		`(?m)foo|bar`:                  "",
		`(?m)(?i)needle`:               "",
		`(?m)a\nb`:                     "", // may span lines
		`(?m)ab\s+cd`:                  "", // \s matches \n
		`(?m)(?s)ab.cd`:                "", // . matches \n
		`(?m)x(abc)+y`:                 "abc",
		`(?m)(abc)?xy`:                 "xy",
		`(?m)[^a]bcd`:                  "", // [^a] matches \n
		`(?m)ab\z`:                     "", // \z holds only at the file's end
		`(?m)\Aab`:                     "", // \A holds only at the file's start
		`(?m)(?-m)ab$`:                 "", // $ without m is \z
		`(?m)\bab\B`:                   "ab",
	}
	for pat, want := range cases {
		p := newPrefilter(pat)
		got := ""
		if p != nil {
			got = string(p.literal)
		}
		if got != want {
			t.Errorf("%s: literal %q, want %q", pat, got, want)
		}
	}
}

// FuzzPrefilter checks that the prefiltered search finds the same lines as
// the plain one.
func FuzzPrefilter(f *testing.F) {
	f.Add(`func \w+`, "package a\nfunc x() {}\n\tfunc  y\nfunc")
	f.Add(`^ab+c$`, "abc\nabbbc\nxabc\nab\n")
	f.Add(`x(yz)+`, "xyzyz\nxy\nzxyz")
	f.Add(`ab\z`, "ab\nab")
	f.Add(`\Aab`, "xx\nab")
	f.Add(`(?-m)ab$`, "ab\n")
	f.Fuzz(func(t *testing.T, pattern, text string) {
		full := "(?m)" + pattern
		re, err := regexp.Compile(full)
		if err != nil {
			return
		}
		data := []byte(text)
		plain := &grepState{re: re}
		fast := &grepState{re: re, pre: newPrefilter(full)}
		if fast.pre == nil {
			return
		}
		for from := 0; from <= len(data); {
			s1, e1, ok1 := plain.nextMatchLine(data, from)
			s2, e2, ok2 := fast.nextMatchLine(data, from)
			if ok1 != ok2 || s1 != s2 || e1 != e2 {
				t.Fatalf("from %d: plain (%d,%d,%v), prefiltered (%d,%d,%v)", from, s1, e1, ok1, s2, e2, ok2)
			}
			if !ok1 {
				break
			}
			from = e1 + 1
		}
	})
}
