package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestDemoBehaves(t *testing.T) {
	var out bytes.Buffer
	if !Run(context.Background(), Options{Out: &out}) {
		t.Fatalf("a scenario did not behave:\n%s", out.String())
	}
	if got := strings.Count(out.String(), "✔"); got < 20 {
		t.Errorf("only %d checks held:\n%s", got, out.String())
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Error("colours without Color")
	}
}

func TestDemoCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	if Run(ctx, Options{Out: &out}) {
		t.Errorf("a cancelled demo reported success:\n%s", out.String())
	}
}
