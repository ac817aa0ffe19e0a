package store_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The checkpoint seam stays light: drivers and backends import it, so it
// pulls in nothing but the standard library and the llm vocabulary. Records
// are opaque JSON, so it must not know the run machine either.
func TestDependencies(t *testing.T) {
	allowed := map[string]bool{
		"github.com/loomkit/loom/store": true,
		"github.com/loomkit/loom/llm":   true,
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 2 {
		t.Fatalf("go list reported %v; is it looking at the right package?", deps)
	}
	for _, p := range deps {
		if !allowed[p] {
			t.Errorf("store depends on %s; only the standard library and llm are allowed (records are opaque JSON; backends live in subpackages)", p)
		}
	}
}
