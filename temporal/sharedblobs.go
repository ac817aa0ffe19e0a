package temporal

import (
	"context"
	"errors"
)

// SharedBlobs adapts a blob store kept elsewhere (a database shared by the
// workers of a task queue, such as store/postgres's Blobs) to Blobs: its Get
// reports a missing key with an error matching notFound, which SharedBlobs
// reports as matching ErrBlobNotFound too, and keys are checked (ErrBlobKey)
// before b sees them. b must otherwise behave as Blobs says: Put of a key
// already there a no-op, Get never partial, safe for concurrent use.
//
// This package does not import the stores, so that a worker pulls in only
// the database driver it uses.
func SharedBlobs(b Blobs, notFound error) Blobs {
	return &adaptedBlobs{b: b, notFound: notFound}
}

type adaptedBlobs struct {
	b        Blobs
	notFound error
}

func (s *adaptedBlobs) Put(ctx context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	return s.b.Put(ctx, key, data)
}

func (s *adaptedBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	data, err := s.b.Get(ctx, key)
	if err != nil && errors.Is(err, s.notFound) && !errors.Is(err, ErrBlobNotFound) {
		return nil, blobNotFound{err}
	}
	return data, err
}

// blobNotFound is the error of a store whose own not-found error Get
// reports as ErrBlobNotFound.
type blobNotFound struct{ err error }

func (e blobNotFound) Error() string        { return e.err.Error() }
func (e blobNotFound) Unwrap() error        { return e.err }
func (e blobNotFound) Is(target error) bool { return target == ErrBlobNotFound }
