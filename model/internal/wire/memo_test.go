package wire

import (
	"fmt"
	"sync"
	"testing"
)

func TestMemo(t *testing.T) {
	var c Memo
	if _, ok := c.Get([]byte("a")); ok {
		t.Fatal("the zero Memo holds something")
	}
	val := []byte("A")
	c.Put([]byte("a"), val)
	c.Put([]byte("none"), nil)
	val[0] = 'X' // the caller's buffer changes after Put
	if v, ok := c.Get([]byte("a")); !ok || string(v) != "A" {
		t.Fatalf("a: %q %v", v, ok)
	}
	if v, ok := c.Get([]byte("none")); !ok || v != nil {
		t.Fatalf("a nil value: %q %v", v, ok)
	}
	c.Put([]byte("a"), []byte("B"))
	if v, _ := c.Get([]byte("a")); string(v) != "A" {
		t.Fatalf("a second Put replaced the value: %q", v)
	}
	for i := range MemoEntries + 10 {
		c.Put(fmt.Appendf(nil, "k%d", i), []byte("v"))
	}
	if c.Len() != MemoEntries {
		t.Fatalf("%d entries, want the bound %d", c.Len(), MemoEntries)
	}
	var big Memo
	big.Put([]byte("huge"), make([]byte, MemoBytes))
	if big.Len() != 0 {
		t.Fatal("a value past MemoBytes was kept")
	}
}

func TestMemoConcurrent(t *testing.T) {
	var c Memo
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				k := fmt.Appendf(nil, "%d", i%50)
				c.Put(k, k)
				if v, ok := c.Get(k); ok && string(v) != string(k) {
					t.Errorf("goroutine %d: %q holds %q", g, k, v)
				}
			}
		})
	}
	wg.Wait()
	if c.Len() != 50 {
		t.Fatalf("%d entries, want 50", c.Len())
	}
}
