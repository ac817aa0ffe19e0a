package wire

import (
	"bytes"
	"sync"
	"sync/atomic"
)

// Bounds on what a Memo remembers.
const (
	MemoEntries = 256
	MemoBytes   = 1 << 20
)

// Memo remembers what an adapter made of a schema (compacted, or fitted
// to the vendor's subset), so that the schemas sent with every turn are
// worked on once per Model. It holds at most MemoEntries entries and
// MemoBytes bytes of keys and values; past that it remembers nothing
// more. Lookups take no lock: the map is replaced, never changed. The zero
// Memo is empty and ready.
type Memo struct {
	m     atomic.Pointer[map[string][]byte]
	mu    sync.Mutex
	bytes int
}

// Get returns the value remembered for key (nil is a value) and whether
// there is one.
func (c *Memo) Get(key []byte) ([]byte, bool) {
	if m := c.m.Load(); m != nil {
		v, ok := (*m)[string(key)]
		return v, ok
	}
	return nil, false
}

// Put remembers a copy of val for key, unless the memo is full or holds
// key already.
func (c *Memo) Put(key, val []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	n := 0
	if old != nil {
		if _, ok := (*old)[string(key)]; ok {
			return
		}
		n = len(*old)
	}
	size := len(key) + len(val)
	if n >= MemoEntries || c.bytes+size > MemoBytes {
		return
	}
	next := make(map[string][]byte, n+1)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[string(key)] = bytes.Clone(val)
	c.bytes += size
	c.m.Store(&next)
}

// Len returns how many entries the memo holds.
func (c *Memo) Len() int {
	if m := c.m.Load(); m != nil {
		return len(*m)
	}
	return 0
}
