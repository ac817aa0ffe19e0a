package store_test

import (
	"fmt"
	"testing"

	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/store/storetest"
)

func BenchmarkMemoryAppend(b *testing.B) {
	for _, history := range []int{10, 1000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			storetest.BenchmarkAppend(b, store.NewMemory(), history, nil)
		})
	}
}

func BenchmarkMemoryLoad1000(b *testing.B) {
	storetest.BenchmarkLoad(b, store.NewMemory(), 1000)
}
