package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
)

// maxNameLen is the longest tool name the providers accept.
const maxNameLen = 64

// shortHash is the number of hex digits of the hash a name gets when it is
// cut or when it collides; more are used in the unlikely case that these
// collide too.
const shortHash = 8

// maxHash is the most hex digits a name's hash grows to (128 bits), which
// leaves 31 characters of the name.
const maxHash = 32

// toolKey names one tool of one server.
type toolKey struct {
	Server, Tool string
}

// sanitize replaces every byte outside [a-zA-Z0-9_-] with '_'. Multi-byte
// runes become one '_' each.
func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// hashed returns clean cut so that clean + "_" + n hex digits of the hash of
// k fits in maxNameLen.
func hashed(clean string, k toolKey, n int) string {
	// The server's length prefixes it, so no two pairs hash the same
	// input (with a plain separator, ("a\x00", "") and ("a", "\x00")
	// would, and no hash length could tell them apart).
	sum := sha256.Sum256([]byte(strconv.Itoa(len(k.Server)) + ":" + k.Server + k.Tool))
	h := hex.EncodeToString(sum[:])[:n]
	if keep := maxNameLen - 1 - n; len(clean) > keep {
		clean = clean[:keep]
	}
	return clean + "_" + h
}

// exposedNames maps each (server, tool) pair to the name the model sees:
// server + "_" + tool, with every character outside [a-zA-Z0-9_-] replaced
// by '_'. A name that is longer than 64 characters is cut and gets a short
// hash of the original pair; names that still collide (fs.read and fs_read
// both become srv_fs_read) each get the hash too, except a name that needed
// no change at all, which keeps it. The result depends only on the set of
// keys, not on their order.
func exposedNames(keys []toolKey) map[toolKey]string {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, func(a, b toolKey) int {
		if c := strings.Compare(a.Server, b.Server); c != 0 {
			return c
		}
		return strings.Compare(a.Tool, b.Tool)
	})
	keys = slices.Compact(keys)

	type cand struct {
		clean string // sanitized, not cut
		exact bool   // the raw name was already valid
		n     int    // hash digits used, 0 for none
		name  string
	}
	cands := make(map[toolKey]*cand, len(keys))
	for _, k := range keys {
		raw := k.Server + "_" + k.Tool
		c := &cand{clean: sanitize(raw)}
		c.exact = c.clean == raw && len(raw) <= maxNameLen
		if len(c.clean) > maxNameLen {
			c.n = shortHash
			c.name = hashed(c.clean, k, c.n)
		} else {
			c.name = c.clean
		}
		cands[k] = c
	}

	// Resolve collisions. Each round gives every colliding name that is not
	// exact a (longer) hash; exact names only collide with each other when
	// two servers' names run together (server "a" tool "b_c", server "a_b"
	// tool "c"), and then they are hashed too. A 128-bit hash ends it.
	for {
		count := make(map[string]int, len(keys))
		exacts := make(map[string]int, len(keys))
		for _, k := range keys {
			c := cands[k]
			count[c.name]++
			if c.exact && c.n == 0 {
				exacts[c.name]++
			}
		}
		changed := false
		for _, k := range keys {
			c := cands[k]
			if count[c.name] < 2 {
				continue
			}
			if c.exact && c.n == 0 && exacts[c.name] == 1 {
				continue // the one untouched name keeps it
			}
			switch {
			case c.n == 0:
				c.n = shortHash
			case c.n < maxHash:
				c.n = min(2*c.n, maxHash)
			default:
				continue
			}
			c.name = hashed(c.clean, k, c.n)
			changed = true
		}
		if !changed {
			break
		}
	}
	out := make(map[toolKey]string, len(keys))
	for _, k := range keys {
		out[k] = cands[k].name
	}
	return out
}
