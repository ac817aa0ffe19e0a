package run

import "testing"

func TestSuggest(t *testing.T) {
	names := []string{"get_weather", "read_file", "write_file", "search"}
	cases := map[string]string{
		"get-weather":   "get_weather", // '-' folds to '_'
		"GET_WEATHER":   "get_weather", // case folds
		"serch":         "search",      // one edit
		"seaarch":       "search",      // one edit
		"sarch":         "search",
		"srch":          "search", // two edits
		"sr":            "",       // too far
		"rm_everything": "",
		"wite_file":     "write_file", // one from write_file, two from read_file
		"rite_file":     "write_file", // one from write_file, two from read_file
		"xead_file":     "read_file",
		"":              "",
	}
	for name, want := range cases {
		if got := suggest(name, names); got != want {
			t.Errorf("suggest(%q) = %q, want %q", name, got, want)
		}
	}
	// Ambiguous: as close to two names.
	if got := suggest("ab", []string{"aa", "bb"}); got != "" {
		t.Errorf("ambiguous suggestion %q", got)
	}
	if got := suggest("x", nil); got != "" {
		t.Errorf("suggestion from nothing: %q", got)
	}
}

func TestDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"abc", "abc", 0}, {"héllo", "hello", 1},
		{"abcdef", "a", 3}, // capped at limit+1
	}
	for _, c := range cases {
		if got := distance(c.a, c.b, 2); got != min(c.want, 3) {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, got, min(c.want, 3))
		}
	}
}
