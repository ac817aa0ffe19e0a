package store_test

import (
	"testing"

	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := store.NewMemory()
		t.Cleanup(func() { s.Close() })
		return s
	})
}
