package temporal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// errElsewhere is the not-found error of a store of another package.
var errElsewhere = errors.New("elsewhere: no such blob")

// elsewhereBlobs stands for a store of another package: it keeps what it
// is given under any key, and says errElsewhere for what it lacks.
type elsewhereBlobs struct {
	mu   sync.Mutex
	m    map[string][]byte
	seen []string // keys it was asked about
}

func (b *elsewhereBlobs) Put(_ context.Context, key string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen = append(b.seen, key)
	if b.m == nil {
		b.m = map[string][]byte{}
	}
	if _, ok := b.m[key]; !ok {
		b.m[key] = append([]byte(nil), data...)
	}
	return nil
}

func (b *elsewhereBlobs) Get(_ context.Context, key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen = append(b.seen, key)
	if d, ok := b.m[key]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w: %s", errElsewhere, key)
}

func TestSharedBlobs(t *testing.T) {
	inner := &elsewhereBlobs{}
	b := SharedBlobs(inner, errElsewhere)
	testBlobs(t, b)
	_, err := b.Get(context.Background(), BlobKey([]byte("never put")))
	if !errors.Is(err, ErrBlobNotFound) || !errors.Is(err, errElsewhere) || err.Error() != errElsewhere.Error()+": "+BlobKey([]byte("never put")) {
		t.Fatalf("Get of a missing key: %v, want the store's own error, matching ErrBlobNotFound too", err)
	}
	// Malformed keys never reach the store.
	for _, k := range inner.seen {
		if checkKey(k) != nil {
			t.Fatalf("the store was asked about the malformed key %q", k)
		}
	}
	// Other errors pass as they are.
	failing := SharedBlobs(&failingBlobs{}, errElsewhere)
	if _, err := failing.Get(context.Background(), BlobKey(nil)); errors.Is(err, ErrBlobNotFound) || !errors.Is(err, errDown) {
		t.Fatalf("a store failing: %v, want its error, not ErrBlobNotFound", err)
	}
}

var errDown = errors.New("the store is down")

type failingBlobs struct{}

func (failingBlobs) Put(context.Context, string, []byte) error   { return errDown }
func (failingBlobs) Get(context.Context, string) ([]byte, error) { return nil, errDown }
