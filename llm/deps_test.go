package llm

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps llm a leaf: the vocabulary everything imports must
// pull in nothing but the standard library.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/loomkit/loom/llm" {
			t.Errorf("llm imports %s; it must use the standard library only", p)
		}
	}
}
