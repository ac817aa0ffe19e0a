package temporal

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Blobs is a content-addressed store shared by the workers of a task
// queue. The model activity keeps the messages of a run in it so that the
// workflow can send each model call only what is new (see the package doc,
// "Bounded history"); the workflow itself never touches it (a workflow may
// do no IO).
//
// A key is BlobKey(data): Put stores data under it and Get returns the
// data stored under it. Implementations must be safe for concurrent use by
// many goroutines (and, for a shared store, many processes): Put of a key
// that is already there is a no-op, and Get never returns partial data.
//
// For transcripts, correctness never depends on the store keeping
// anything: an activity that misses a blob says so, and the workflow sends
// the messages again in full. What the store buys is small activity
// inputs. Two things need the store to keep its blobs: a run carried over
// continue-as-new by reference (a run snapshot larger than
// Options.InlineCarryBytes), until the next run of the workflow has loaded
// them; and the images of tool results (see ImageRefPrefix), whose bytes
// the tool activity keeps only in the store, until the run's last model
// call (and until whoever reads the result has resolved them). Use a
// durable store shared by every worker (DirBlobs on one machine or a
// shared file system; store/postgres's Blobs through SharedBlobs on a
// shared database; or your own) when tools return images
// or runs grow long: a model call that misses an image fails the run with
// a *StoreError.
type Blobs interface {
	Put(ctx context.Context, key string, data []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
}

// ErrBlobNotFound is matched (errors.Is) by the error a Blobs returns from
// Get for a key it does not hold.
var ErrBlobNotFound = errors.New("temporal: blob not found")

// ErrBlobKey is matched (errors.Is) by the error for a key that BlobKey
// could not have made.
var ErrBlobKey = errors.New("temporal: malformed blob key")

const blobKeyPrefix = "sha256-"

// BlobKey returns the key of data: "sha256-" followed by the hex SHA-256
// of data.
func BlobKey(data []byte) string {
	sum := sha256.Sum256(data)
	return blobKeyPrefix + hex.EncodeToString(sum[:])
}

// checkKey returns an error matching ErrBlobKey unless key has the shape
// BlobKey gives, so that a key can never name a path outside a DirBlobs.
func checkKey(key string) error {
	if len(key) != len(blobKeyPrefix)+64 || key[:len(blobKeyPrefix)] != blobKeyPrefix {
		return fmt.Errorf("%w: %.80q is not \"sha256-\" and 64 hex digits", ErrBlobKey, key)
	}
	for _, c := range key[len(blobKeyPrefix):] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("%w: %.80q is not \"sha256-\" and 64 lower-case hex digits", ErrBlobKey, key)
		}
	}
	return nil
}

// MemoryBlobs is a Blobs in the memory of one process. It keeps every blob
// until the process ends, so it suits tests and single workers with short
// runs. The zero value is ready; it is safe for concurrent use.
type MemoryBlobs struct {
	mu sync.RWMutex
	m  map[string][]byte
	n  int64
}

// Put stores a copy of data under key.
func (b *MemoryBlobs) Put(_ context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[key]; ok {
		return nil
	}
	if b.m == nil {
		b.m = make(map[string][]byte)
	}
	b.m[key] = append([]byte(nil), data...)
	b.n += int64(len(data))
	return nil
}

// Get returns the data stored under key. The slice is shared with the
// store: do not modify it.
func (b *MemoryBlobs) Get(_ context.Context, key string) ([]byte, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	data, ok := b.m[key]
	if !ok {
		return nil, fmt.Errorf("%w: %.80s", ErrBlobNotFound, key)
	}
	return data, nil
}

// Len returns how many blobs are stored and their total size in bytes.
func (b *MemoryBlobs) Len() (blobs int, bytes int64) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.m), b.n
}

// DirBlobs is a Blobs kept as files in a directory, one file per blob
// under a two-character fan-out directory (dir/ab/sha256-ab...). Writes
// are atomic (a temporary file renamed into place, after fsync), so a
// crash leaves a blob whole or absent, and any number of processes on one
// machine may share the directory. Get checks each blob against its key,
// so a damaged file reads as missing instead of as wrong content.
//
// Nothing is ever deleted: blobs are small and shared between runs (the
// same system prompt or tool list is stored once), but a long-lived
// directory grows; remove files older than your longest run to reclaim
// space. A DirBlobs is safe for concurrent use.
type DirBlobs struct {
	dir string
}

// NewDirBlobs returns a DirBlobs in dir, creating it if needed.
func NewDirBlobs(dir string) (*DirBlobs, error) {
	if dir == "" {
		return nil, errors.New("temporal: NewDirBlobs needs a directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("temporal: blob directory: %w", err)
	}
	return &DirBlobs{dir: dir}, nil
}

func (b *DirBlobs) path(key string) string {
	hex := key[len(blobKeyPrefix):]
	return filepath.Join(b.dir, hex[:2], key)
}

// Put writes data under key unless a blob is already there.
func (b *DirBlobs) Put(_ context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	p := b.path(key)
	if fi, err := os.Stat(p); err == nil && fi.Size() == int64(len(data)) {
		return nil // there already (a cut file is written again)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("temporal: blob directory: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("temporal: writing blob: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("temporal: writing blob %s: %w", key, err)
	}
	return nil
}

// Get reads the blob stored under key.
func (b *DirBlobs) Get(_ context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(b.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrBlobNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("temporal: reading blob %s: %w", key, err)
	}
	if BlobKey(data) != key {
		return nil, fmt.Errorf("%w: %s is damaged (its content does not match its key)", ErrBlobNotFound, key)
	}
	return data, nil
}

// blobCache is a byte-bounded LRU of blobs in front of a Blobs, so that a
// worker assembling the same growing transcript call after call reads each
// message from the store once. It is safe for concurrent use.
type blobCache struct {
	store Blobs
	max   int64

	mu    sync.Mutex
	ll    *list.List
	items map[string]*list.Element
	size  int64
}

type cacheEntry struct {
	key  string
	data []byte
	// decoded is the blob decoded (an llm.Message), set on first use:
	// decoding a transcript again for every call would cost as much as
	// the quadratic history this package avoids.
	decoded any
}

func newBlobCache(store Blobs, max int64) *blobCache {
	return &blobCache{store: store, max: max, ll: list.New(), items: make(map[string]*list.Element)}
}

func (c *blobCache) lookup(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheEntry).data, true
	}
	return nil, false
}

func (c *blobCache) add(key string, data []byte) {
	if int64(len(data)) > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		return
	}
	c.items[key] = c.ll.PushFront(&cacheEntry{key: key, data: data})
	c.size += int64(len(data))
	for c.size > c.max {
		e := c.ll.Back()
		ce := e.Value.(*cacheEntry)
		c.ll.Remove(e)
		delete(c.items, ce.key)
		c.size -= int64(len(ce.data))
	}
}

// decoded returns what setDecoded stored for key.
func (c *blobCache) decoded(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok && e.Value.(*cacheEntry).decoded != nil {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheEntry).decoded, true
	}
	return nil, false
}

// setDecoded keeps v, the decoded blob of key, while key is cached.
func (c *blobCache) setDecoded(key string, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		e.Value.(*cacheEntry).decoded = v
	}
}

// get returns the blob under key from the cache or the store.
func (c *blobCache) get(ctx context.Context, key string) ([]byte, error) {
	if data, ok := c.lookup(key); ok {
		return data, nil
	}
	data, err := c.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	c.add(key, data)
	return data, nil
}

// put stores data under key in the store (unless this worker stored it
// already) and caches it.
func (c *blobCache) put(ctx context.Context, key string, data []byte) error {
	if _, ok := c.lookup(key); ok {
		return nil
	}
	if err := c.store.Put(ctx, key, data); err != nil {
		return err
	}
	c.add(key, data)
	return nil
}
