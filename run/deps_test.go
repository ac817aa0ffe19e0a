package run_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// The machine stays pure: standard library plus llm only, and none of the
// packages that would let it block, read the clock, draw randomness, or
// touch the world.
func TestDependencies(t *testing.T) {
	banned := map[string]string{
		"context":      "the machine never blocks; drivers own cancellation",
		"time":         "the machine reads no clock; times come in as arguments",
		"math/rand":    "the machine uses no randomness; ids are minted deterministically",
		"math/rand/v2": "the machine uses no randomness; ids are minted deterministically",
		"os":           "the machine does no IO",
		"net":          "the machine does no IO",
		"net/http":     "the machine does no IO",
	}
	const self, vocabulary = "github.com/loomkit/loom/run", "github.com/loomkit/loom/llm"
	out, err := exec.Command("go", "list", "-deps", "-json", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath string
		Standard   bool
		Imports    []string
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var seen int
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen++
		if !p.Standard && p.ImportPath != self && p.ImportPath != vocabulary {
			t.Errorf("run depends on %s; only the standard library and %s are allowed", p.ImportPath, vocabulary)
		}
		if p.ImportPath == self {
			for _, imp := range p.Imports {
				if why, bad := banned[imp]; bad {
					t.Errorf("%s imports %s: %s", p.ImportPath, imp, why)
				}
			}
		}
		if p.ImportPath == self && !strings.Contains(strings.Join(p.Imports, " "), vocabulary) {
			t.Errorf("run does not import %s; is go list looking at the right package?", vocabulary)
		}
	}
	if seen < 2 {
		t.Fatalf("go list reported %d packages", seen)
	}
}
