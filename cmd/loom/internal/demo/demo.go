// Package demo is loom demo.
package demo

import (
	"context"
	"io"
)

// Options configure Run.
type Options struct {
	Out   io.Writer
	Color bool
}

// Run runs the demo.
func Run(ctx context.Context, o Options) bool { return false }
