package fs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/loomkit/loom/tool"
	"github.com/loomkit/loom/tool/fs"
)

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

// benchTree generates a 10 MB tree of Go-like source once: 40 directories
// of 25 files of about 10 KB (250 lines) each, plus a .git directory that
// grep must skip.
func benchTree(b *testing.B) string {
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "loom-fs-bench")
		if benchErr != nil {
			return
		}
		r := rand.New(rand.NewPCG(1, 2))
		words := strings.Fields("func return if else for range var const type struct interface map chan go defer select case switch err nil ctx")
		var line strings.Builder
		for d := range 40 {
			for f := range 25 {
				var buf strings.Builder
				fmt.Fprintf(&buf, "package p%d\n\n", d)
				for l := range 250 {
					line.Reset()
					line.WriteString("\t")
					for range 6 {
						line.WriteString(words[r.IntN(len(words))])
						line.WriteByte(' ')
					}
					if l == 100 && f == 3 && d%10 == 0 {
						line.WriteString("// NEEDLE here") // 4 in the tree
					}
					if l%97 == 0 {
						line.WriteString("// common here") // 3 a file
					}
					buf.WriteString(line.String() + "\n")
				}
				p := filepath.Join(benchDir, fmt.Sprintf("pkg%02d/sub/file%02d.go", d, f))
				if benchErr = os.MkdirAll(filepath.Dir(p), 0o755); benchErr != nil {
					return
				}
				if benchErr = os.WriteFile(p, []byte(buf.String()), 0o644); benchErr != nil {
					return
				}
			}
		}
		benchErr = os.MkdirAll(filepath.Join(benchDir, ".git/objects"), 0o755)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDir
}

func benchTool(b *testing.B, name string) tool.Tool {
	ts, err := fs.New(benchTree(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ts.Close() })
	set, _ := tool.NewSet(ts.Tools()...)
	tl, _ := set.Lookup(name)
	return tl
}

func run(b *testing.B, tl tool.Tool, args string) {
	ctx := context.Background()
	raw := json.RawMessage(args)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		res, err := tl.Call(ctx, raw)
		if err != nil || res.IsError {
			b.Fatalf("%v %s", err, res.Content)
		}
		size = len(res.Content)
	}
	b.ReportMetric(float64(size), "result-bytes")
}

// BenchmarkReadFile reads one 10 KB file of the tree whole.
func BenchmarkReadFile(b *testing.B) {
	run(b, benchTool(b, "read_file"), `{"path":"pkg07/sub/file13.go"}`)
}

// BenchmarkReadFileWindow reads 100 lines from the middle of a file.
func BenchmarkReadFileWindow(b *testing.B) {
	run(b, benchTool(b, "read_file"), `{"path":"pkg07/sub/file13.go","offset":100,"limit":100}`)
}

// BenchmarkGrep searches the whole 10 MB tree for a rare literal.
func BenchmarkGrep(b *testing.B) {
	run(b, benchTool(b, "grep"), `{"pattern":"NEEDLE"}`)
}

// BenchmarkGrepRegexp searches the whole tree for a rare anchored regexp.
func BenchmarkGrepRegexp(b *testing.B) {
	run(b, benchTool(b, "grep"), `{"pattern":"^\\t\\w+ .*NEEDLE h[a-z]+$"}`)
}

// BenchmarkGrepCommon searches for a literal on 3,000 lines; the output
// limit ends the search early.
func BenchmarkGrepCommon(b *testing.B) {
	run(b, benchTool(b, "grep"), `{"pattern":"common"}`)
}

// BenchmarkGrepRegexpInclude searches with a regexp and an include glob.
func BenchmarkGrepRegexpInclude(b *testing.B) {
	run(b, benchTool(b, "grep"), `{"pattern":"^\\tfunc \\w+ nil","include":"file1*.go"}`)
}

// BenchmarkGlob matches every Go file of the tree.
func BenchmarkGlob(b *testing.B) {
	run(b, benchTool(b, "glob"), `{"pattern":"**/file0*.go"}`)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}
