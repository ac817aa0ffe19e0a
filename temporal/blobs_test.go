package temporal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// testBlobs is the behaviour every Blobs has.
func testBlobs(t *testing.T, b Blobs) {
	ctx := context.Background()
	data := []byte("hello, blobs")
	key := BlobKey(data)
	if _, err := b.Get(ctx, key); !errors.Is(err, ErrBlobNotFound) {
		t.Fatalf("Get of a missing key: %v", err)
	}
	if err := b.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, key, data); err != nil {
		t.Fatalf("a second Put: %v", err)
	}
	got, err := b.Get(ctx, key)
	if err != nil || string(got) != string(data) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	for _, bad := range []string{"", "sha256-", "../../etc/passwd", "sha256-" + strings.Repeat("g", 64), "sha256-" + strings.Repeat("A", 64), "md5-" + strings.Repeat("a", 67), key + "/"} {
		if err := b.Put(ctx, bad, data); !errors.Is(err, ErrBlobKey) {
			t.Errorf("Put(%q) = %v, want ErrBlobKey", bad, err)
		}
	}
	// Concurrent puts and gets of the same and different keys.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := []byte(fmt.Sprintf("blob %d", i%4))
			k := BlobKey(d)
			if err := b.Put(ctx, k, d); err != nil {
				t.Error(err)
				return
			}
			if got, err := b.Get(ctx, k); err != nil || string(got) != string(d) {
				t.Errorf("Get = %q, %v", got, err)
			}
		}()
	}
	wg.Wait()
}

func TestMemoryBlobs(t *testing.T) {
	var b MemoryBlobs
	testBlobs(t, &b)
	if n, size := b.Len(); n != 5 || size != int64(len("hello, blobs")+4*len("blob 0")) {
		t.Fatalf("Len = %d, %d", n, size)
	}
}

func TestDirBlobs(t *testing.T) {
	dir := t.TempDir()
	b, err := NewDirBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	testBlobs(t, b)
	ctx := context.Background()

	// Another DirBlobs on the same directory (another process) sees the
	// blobs.
	data := []byte("shared")
	key := BlobKey(data)
	if err := b.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	other, err := NewDirBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := other.Get(ctx, key); err != nil || string(got) != "shared" {
		t.Fatalf("another DirBlobs: %q, %v", got, err)
	}

	// A damaged file reads as missing, not as wrong content.
	path := filepath.Join(dir, key[len("sha256-"):][:2], key)
	if err := os.WriteFile(path, []byte("shaded"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, key); !errors.Is(err, ErrBlobNotFound) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Get of a damaged blob: %v", err)
	}
	// No temporary files are left behind.
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if strings.HasPrefix(d.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewDirBlobs(""); err == nil {
		t.Fatal("NewDirBlobs accepted no directory")
	}
}

func TestDirBlobsUnwritable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes anywhere")
	}
	dir := t.TempDir()
	b, err := NewDirBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	data := []byte("x")
	if err := b.Put(context.Background(), BlobKey(data), data); err == nil {
		t.Fatal("Put into a read-only directory succeeded")
	}
}

func TestBlobCacheEvicts(t *testing.T) {
	var store MemoryBlobs
	c := newBlobCache(&store, 100)
	ctx := context.Background()
	for i := range 10 {
		d := []byte(fmt.Sprintf("%020d", i))
		if err := c.put(ctx, BlobKey(d), d); err != nil {
			t.Fatal(err)
		}
	}
	if c.size > 100 || len(c.items) != 5 {
		t.Fatalf("cache holds %d bytes in %d items, bound 100", c.size, len(c.items))
	}
	// Evicted blobs come back from the store.
	d := []byte(fmt.Sprintf("%020d", 0))
	if got, err := c.get(ctx, BlobKey(d)); err != nil || string(got) != string(d) {
		t.Fatalf("get of an evicted blob: %q, %v", got, err)
	}
	// A blob larger than a quarter of the bound is not cached.
	big := []byte(strings.Repeat("b", 30))
	if err := c.put(ctx, BlobKey(big), big); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.lookup(BlobKey(big)); ok {
		t.Fatal("a large blob was cached")
	}
}
