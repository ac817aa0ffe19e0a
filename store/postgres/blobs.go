package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomkit/loom/store"
)

// MaxBlobSize bounds one blob (64 MiB).
const MaxBlobSize = 64 << 20

// ErrBlobNotFound is matched by the error of Blobs.Get for a key the store
// does not hold (or holds damaged).
var ErrBlobNotFound = errors.New("store/postgres: blob not found")

// Blobs is a content-addressed blob store in the store's database: the
// store the Temporal workers of a task queue share (package temporal's
// Blobs interface, which temporal.SharedBlobs adapts it to). A key is
// "sha256-" and the 64 lower-case hex digits of the SHA-256 of the data.
//
// Put of a key already there does nothing, so any number of processes may
// put the same blob at once; Get returns a blob whole or not at all, and
// checks it against its key, so a damaged row reads as missing. Nothing is
// deleted. Blobs is safe for concurrent use; it is closed with its Store.
type Blobs struct{ s *Store }

const blobKeyPrefix = "sha256-"

// blobKey returns the key of data.
func blobKey(data []byte) string {
	sum := sha256.Sum256(data)
	return blobKeyPrefix + hex.EncodeToString(sum[:])
}

// checkBlobKey refuses keys blobKey could not have made.
func checkBlobKey(key string) error {
	ok := len(key) == len(blobKeyPrefix)+64 && key[:len(blobKeyPrefix)] == blobKeyPrefix
	for i := len(blobKeyPrefix); ok && i < len(key); i++ {
		c := key[i]
		ok = '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
	}
	if !ok {
		return fmt.Errorf("%w: blob key %.80q is not \"sha256-\" and 64 lower-case hex digits", store.ErrInvalid, key)
	}
	return nil
}

// Put stores data under key, which must be the key of data; a blob already
// there is kept. It keeps no reference to data.
func (b *Blobs) Put(ctx context.Context, key string, data []byte) error {
	if err := checkBlobKey(key); err != nil {
		return err
	}
	if len(data) > MaxBlobSize {
		return fmt.Errorf("%w: blob %s holds %d bytes, more than the limit of %d", store.ErrInvalid, key, len(data), MaxBlobSize)
	}
	if k := blobKey(data); k != key {
		return fmt.Errorf("%w: blob put under key %s, but its data's key is %s", store.ErrInvalid, key, k)
	}
	s := b.s
	if err := s.enter(ctx); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if data == nil {
		data = []byte{} // the empty blob, not NULL
	}
	if _, err := s.pool.Exec(ctx, s.q.putBlob, key, data); err != nil {
		return s.fail(ctx, fmt.Sprintf("put blob %s (%s)", key, unsaved(err)), err)
	}
	return nil
}

// Get returns the blob stored under key; the caller owns it. A missing or
// damaged blob is an error matching ErrBlobNotFound.
func (b *Blobs) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkBlobKey(key); err != nil {
		return nil, err
	}
	s := b.s
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var data []byte
	var n int64
	err := s.pool.QueryRow(ctx, s.q.getBlob, key, MaxBlobSize).Scan(&data, &n)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("%w: %s", ErrBlobNotFound, key)
	case err != nil:
		return nil, s.fail(ctx, fmt.Sprintf("get blob %s", key), err)
	case data == nil:
		return nil, fmt.Errorf("%w: %s is damaged: it holds %d bytes, more than a blob may (%d)", ErrBlobNotFound, key, n, MaxBlobSize)
	case blobKey(data) != key:
		return nil, fmt.Errorf("%w: %s is damaged (its content does not match its key)", ErrBlobNotFound, key)
	}
	return data, nil
}
