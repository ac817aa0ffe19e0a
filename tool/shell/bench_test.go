package shell

import (
	"encoding/json"
	"testing"
)

// BenchmarkCommand measures one bash call end to end, unconfined and in the
// default sandbox (building the ruleset, a thread of its own, Landlock).
func BenchmarkCommand(b *testing.B) {
	raw, _ := json.Marshal(Args{Command: "true"})
	for _, bc := range []struct {
		name string
		box  *Sandbox
	}{{"plain", nil}, {"sandboxed", &Sandbox{}}} {
		b.Run(bc.name, func(b *testing.B) {
			tl := New(&Config{Dir: b.TempDir(), Sandbox: bc.box})
			b.ReportAllocs()
			for b.Loop() {
				res, err := tl.Call(b.Context(), raw)
				if err != nil || res.IsError {
					b.Fatalf("%v %s", err, res.Content)
				}
			}
		})
	}
}

// BenchmarkRuleset measures building the default sandbox's ruleset alone.
func BenchmarkRuleset(b *testing.B) {
	if landlockABI() < 1 {
		b.Skip("no Landlock")
	}
	box := &Sandbox{}
	p, err := box.plan(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		fd, _, err := p.ruleset()
		if err != nil {
			b.Fatal(err)
		}
		closeFD(fd)
	}
}
