package mcp

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

var validNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestExposedNames(t *testing.T) {
	long := strings.Repeat("x", 70)
	tests := []struct {
		name string
		keys []toolKey
		want map[toolKey]string // exact names; "" means "check the hash form"
	}{
		{
			name: "valid names are joined unchanged",
			keys: []toolKey{{"everything", "get-sum"}, {"everything", "echo"}},
			want: map[toolKey]string{{"everything", "get-sum"}: "everything_get-sum", {"everything", "echo"}: "everything_echo"},
		},
		{
			// ADVERSARIAL 36.
			name: "dots and slashes become underscores",
			keys: []toolKey{{"fs", "fs.read/file"}},
			want: map[toolKey]string{{"fs", "fs.read/file"}: "fs_fs_read_file"},
		},
		{
			name: "server names are sanitized too",
			keys: []toolKey{{"my server", "läuft"}},
			want: map[toolKey]string{{"my server", "läuft"}: "my_server_l_uft"},
		},
		{
			name: "a collision hashes the changed name and keeps the exact one",
			keys: []toolKey{{"s", "a.b"}, {"s", "a_b"}},
			want: map[toolKey]string{{"s", "a_b"}: "s_a_b", {"s", "a.b"}: ""},
		},
		{
			name: "a collision of two changed names hashes both",
			keys: []toolKey{{"s", "a.b"}, {"s", "a/b"}},
			want: map[toolKey]string{{"s", "a.b"}: "", {"s", "a/b"}: ""},
		},
		{
			name: "two exact names across servers hash both",
			keys: []toolKey{{"a", "b_c"}, {"a_b", "c"}},
			want: map[toolKey]string{{"a", "b_c"}: "", {"a_b", "c"}: ""},
		},
		{
			name: "long names are cut and hashed",
			keys: []toolKey{{"srv", long}, {"srv", long + "y"}},
			want: map[toolKey]string{{"srv", long}: "", {"srv", long + "y"}: ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := exposedNames(tt.keys)
			checkNames(t, tt.keys, got)
			for k, want := range tt.want {
				name := got[k]
				if want != "" {
					if name != want {
						t.Errorf("%v: got %q, want %q", k, name, want)
					}
					continue
				}
				if !regexp.MustCompile(`_[0-9a-f]{8}$`).MatchString(name) {
					t.Errorf("%v: got %q, want a name ending in _ and an 8-digit hash", k, name)
				}
				if prefix := sanitize(k.Server + "_" + k.Tool); !strings.HasPrefix(prefix, name[:len(name)-9]) {
					t.Errorf("%v: got %q, which does not start with a prefix of %q", k, name, prefix)
				}
			}
		})
	}
}

// checkNames checks the properties every naming must have.
func checkNames(t *testing.T, keys []toolKey, got map[toolKey]string) {
	t.Helper()
	seen := map[string]toolKey{}
	for _, k := range keys {
		name, ok := got[k]
		if !ok {
			t.Fatalf("%v has no name", k)
		}
		if !validNameRE.MatchString(name) {
			t.Errorf("%v: %q does not match %s", k, name, validNameRE)
		}
		if other, dup := seen[name]; dup && other != k {
			t.Errorf("%v and %v are both named %q", k, other, name)
		}
		seen[name] = k
	}
	// The naming depends on the set, not on the order.
	rev := slices.Clone(keys)
	slices.Reverse(rev)
	again := exposedNames(rev)
	for _, k := range keys {
		if again[k] != got[k] {
			t.Errorf("%v: %q in one order, %q in the other", k, got[k], again[k])
		}
	}
}

func TestExposedNamesHashCollision(t *testing.T) {
	// A tool literally named like another's hashed name: the exact one
	// keeps it, the hashed one takes a longer hash.
	first := exposedNames([]toolKey{{"s", "a.b"}, {"s", "a_b"}})
	hashedName := first[toolKey{"s", "a.b"}]
	keys := []toolKey{{"s", "a.b"}, {"s", "a_b"}, {"s", strings.TrimPrefix(hashedName, "s_")}}
	got := exposedNames(keys)
	checkNames(t, keys, got)
	if got[keys[2]] != hashedName {
		t.Errorf("the exact name %q was changed to %q", hashedName, got[keys[2]])
	}
	if n := got[keys[0]]; !regexp.MustCompile(`_[0-9a-f]{16}$`).MatchString(n) {
		t.Errorf("got %q, want a 16-digit hash after colliding with an exact name", n)
	}
}

func FuzzExposedNames(f *testing.F) {
	f.Add("fs", "fs.read/file", "fs_read_file", "fs", "read")
	f.Add("a", "b_c", "c", "a_b", "")
	f.Add(strings.Repeat("s", 64), "t", "t", strings.Repeat("s", 64)+"\x00", "ü")
	f.Fuzz(func(t *testing.T, s1, t1, t2, s2, t3 string) {
		keys := []toolKey{{s1, t1}, {s1, t2}, {s2, t1}, {s2, t3}}
		checkNames(t, keys, exposedNames(keys))
	})
}

func BenchmarkExposedNames(b *testing.B) {
	var keys []toolKey
	for i := range 100 {
		keys = append(keys, toolKey{"server", strings.Repeat("t", i%70) + ".x"})
	}
	b.ReportAllocs()
	for b.Loop() {
		exposedNames(keys)
	}
}
