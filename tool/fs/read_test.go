package fs_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomkit/loom/tool/fs"
)

func lines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestReadFile(t *testing.T) {
	e := newEnv(t, nil)
	e.file("a.txt", "alpha\n\tbeta\ngamma")
	if got, want := e.ok("read_file", map[string]any{"path": "a.txt"}), "     1\talpha\n     2\t\tbeta\n     3\tgamma\n"; got != want {
		t.Errorf("read_file = %q, want %q", got, want)
	}

	e.file("long.txt", lines(100))
	got := e.ok("read_file", map[string]any{"path": "long.txt", "offset": 10, "limit": 3})
	want := "    10\tline 10\n    11\tline 11\n    12\tline 12\n\n[long.txt continues after line 12; read on with offset=13]"
	if got != want {
		t.Errorf("offset/limit: got %q, want %q", got, want)
	}
	if got := e.ok("read_file", map[string]any{"path": "long.txt", "offset": 100}); got != "   100\tline 100\n" {
		t.Errorf("last line: %q", got)
	}
	e.fails("read_file", map[string]any{"path": "long.txt", "offset": 101}, "offset 101 is past the end", "100 lines")
	e.fails("read_file", map[string]any{"path": "long.txt", "offset": -1}, "offset")

	e.file("empty.txt", "")
	if got := e.ok("read_file", map[string]any{"path": "empty.txt"}); !strings.Contains(got, "empty") {
		t.Errorf("empty file: %q", got)
	}

	e.file("sub/dir/x.go", "package x\n")
	e.fails("read_file", map[string]any{"path": "sub/dir"}, "is a directory", "list_dir")
	e.fails("read_file", map[string]any{"path": "nope.txt"}, `"nope.txt" does not exist`)
	e.ok("read_file", map[string]any{"path": "sub/../sub/dir/x.go"}) // a/../b inside is fine
	e.ok("read_file", map[string]any{"path": filepath.Join(e.ts.Dir(), "sub/dir/x.go")})
}

func TestReadFileDefaultLimitAndBudget(t *testing.T) {
	e := newEnv(t, &fs.Options{MaxLines: 5, MaxResult: 1000})
	e.file("long.txt", lines(50))
	got := e.ok("read_file", map[string]any{"path": "long.txt"})
	if !strings.HasSuffix(got, "read on with offset=6]") || strings.Count(got, "\n") != 6 {
		t.Errorf("default limit: %q", got)
	}
	// A limit larger than the output budget stops at the budget and says
	// where to go on.
	e.file("wide.txt", strings.Repeat(strings.Repeat("x", 90)+"\n", 100))
	got = e.ok("read_file", map[string]any{"path": "wide.txt", "limit": 100})
	if !strings.Contains(got, "output limit reached") || len(got) > 1000 {
		t.Errorf("budget: %d bytes: %q", len(got), got)
	}
}

func TestReadFileLongLinesAndEncoding(t *testing.T) {
	e := newEnv(t, &fs.Options{MaxLineLength: 10})
	e.file("l.txt", "ééééééééé\nshort\r\nbad \xff byte\n")
	got := e.ok("read_file", map[string]any{"path": "l.txt"})
	want := "     1\tééééé [line cut]\n     2\tshort\r\n     3\tbad \uFFFD byte\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestReadFileBinary(t *testing.T) {
	e := newEnv(t, nil)
	e.file("img.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	got := e.ok("read_file", map[string]any{"path": "img.png"})
	if !strings.Contains(got, "binary file") || strings.Contains(got, "PNG") {
		t.Errorf("binary: %q", got)
	}
	noisy := make([]byte, 1000)
	for i := range noisy {
		noisy[i] = byte(0x80 + i%0x40) // invalid UTF-8, no NUL
	}
	e.file("noise.bin", string(noisy))
	if got := e.ok("read_file", map[string]any{"path": "noise.bin"}); !strings.Contains(got, "binary file") {
		t.Errorf("invalid UTF-8 noise: %q", got)
	}
}

// ADVERSARIAL 47: FIFOs, sockets and devices are refused, and never block.
func TestReadFileSpecialFilesNeverBlock(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no FIFOs")
	}
	e := newEnv(t, nil)
	if err := syscall.Mkfifo(filepath.Join(e.ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A unix socket path must be short; listen from inside the workspace.
	wd, _ := os.Getwd()
	if err := os.Chdir(e.ws); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", "sock")
	os.Chdir(wd)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cases := map[string]string{"fifo": "named pipe", "sock": "socket"}
	if err := syscall.Mknod(filepath.Join(e.ws, "zero"), syscall.S_IFCHR|0o666, int(1<<8|5)); err == nil {
		cases["zero"] = "character device"
	} else {
		t.Logf("cannot make a device node (%v); the device case is not run", err)
	}
	e.symlink("fifo", "fifo-link")
	cases["fifo-link"] = "named pipe"
	for name, kind := range cases {
		done := make(chan string, 1)
		go func() {
			res := e.call("read_file", map[string]any{"path": name})
			if !res.IsError {
				done <- "not an error: " + res.Content
				return
			}
			done <- res.Content
		}()
		select {
		case msg := <-done:
			if !strings.Contains(msg, kind) || !strings.Contains(msg, "not a regular file") {
				t.Errorf("%s: %q", name, msg)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("read_file(%s) blocked", name)
		}
	}
	// edit_file and grep refuse or skip them too.
	e.fails("edit_file", map[string]any{"path": "fifo", "old_string": "a", "new_string": "b"}, "named pipe")
	if got := e.ok("grep", map[string]any{"pattern": "x"}); !strings.Contains(got, "No matches") {
		t.Errorf("grep over special files: %q", got)
	}
	e.fails("write_file", map[string]any{"path": "fifo", "content": "x"}, "named pipe")
}

// ADVERSARIAL 48: a huge file is read with bounded memory and a marker.
func TestReadFileHugeSparse(t *testing.T) {
	e := newEnv(t, &fs.Options{MaxFileSize: 4 << 20})
	p := filepath.Join(e.ws, "huge.log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(lines(2000))                   // more than the binary sniff
	if err := f.Truncate(10 << 30); err != nil { // 10 GiB, sparse: zeros after the text
		f.Close()
		t.Skipf("cannot make a sparse file: %v", err)
	}
	f.Close()

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := e.ok("read_file", map[string]any{"path": "huge.log", "limit": 5})
	if !strings.HasPrefix(got, "     1\tline 1\n") || !strings.Contains(got, "offset=6") {
		t.Errorf("head of huge file: %q", got)
	}
	// Reading past the text scans up to the cap and stops there.
	msg := e.fails("read_file", map[string]any{"path": "huge.log", "offset": 5000}, "read no further")
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("reading a 10 GiB file allocated %d bytes; want it bounded (< 16 MiB)", alloc)
	}
	t.Log(msg)
	e.fails("edit_file", map[string]any{"path": "huge.log", "old_string": "line 1", "new_string": "x"}, "at most")
}

func TestTinyResultLimit(t *testing.T) {
	e := newEnv(t, &fs.Options{MaxResult: 20})
	e.file("a.txt", lines(10))
	for _, c := range []struct{ name, args string }{
		{"read_file", `{"path":"a.txt"}`},
		{"grep", `{"pattern":"line"}`},
		{"glob", `{"pattern":"*"}`},
		{"list_dir", `{}`},
	} {
		res := e.call(c.name, c.args)
		if res.IsError {
			t.Errorf("%s: %s", c.name, res.Content)
		}
	}
}
