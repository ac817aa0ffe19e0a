package postgres

import (
	"testing"
	"time"

	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/store/storetest"
)

// The conformance suite, with the claim clock the process's own: its
// ClaimExpiry case moves a fake clock (testing/synctest) that the server
// cannot see. The server's clock, the default, has tests of its own
// (clock_test.go).
func TestConformance(t *testing.T) {
	serverURL(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t, &Options{ClaimClock: time.Now})
	})
}
