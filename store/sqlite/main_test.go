package sqlite

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	childMain() // the test binary doubles as the child process of the crash tests
	os.Exit(m.Run())
}
