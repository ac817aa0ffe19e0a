package shell

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// needLandlock skips the test when the kernel cannot enforce abi, saying
// what it needs.
func needLandlock(t *testing.T, abi int) {
	t.Helper()
	if got := landlockABI(); got < abi {
		t.Skipf("the kernel's Landlock ABI is %d; this test needs %d (Linux 5.13+ for files, 6.7+ for network, with lsm=landlock)", got, abi)
	}
}

// sandboxFixture is a fake home holding a secret, and a workspace.
type sandboxFixture struct {
	home, secret, ws string
}

const secretText = "BEGIN-FAKE-PRIVATE-KEY-7f3a"

func newSandboxFixture(t *testing.T) sandboxFixture {
	t.Helper()
	base := t.TempDir()
	f := sandboxFixture{home: filepath.Join(base, "home"), ws: filepath.Join(base, "home", "src", "proj")}
	for _, d := range []string{filepath.Join(f.home, ".ssh"), f.ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.secret = filepath.Join(f.home, ".ssh", "id_rsa")
	if err := os.WriteFile(f.secret, []byte(secretText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.home, "notes.txt"), []byte("plain notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link made before the run, the way a dotfiles repository would.
	if err := os.Symlink(filepath.Join(f.home, ".ssh"), filepath.Join(f.home, "keys")); err != nil {
		t.Fatal(err)
	}
	return f
}

// tool returns a bash tool over the fixture's workspace, with a sandbox
// hiding the fake home's keys and allowing writes to the workspace only
// (nil box: no sandbox).
func (f sandboxFixture) tool(t *testing.T, box *Sandbox) *Tool {
	if box != nil {
		b := *box
		b.Hide = DefaultHidden(f.home)
		if b.Write == nil {
			b.Write = []string{}
		}
		box = &b
	}
	return newTestTool(t, &Config{Dir: f.ws, Sandbox: box})
}

// ADVERSARIAL 46: a symlink the model makes with ln -s, then reads through
// bash, is stopped by the kernel; the same commands unconfined read the key
// (so the test can fail).
func TestSandboxHidesSecretsThroughLinks(t *testing.T) {
	needLandlock(t, 1)
	f := newSandboxFixture(t)
	reads := []string{
		"ln -s " + f.secret + " pw && cat pw",
		"ln " + f.secret + " pw && cat pw", // a hard link
		"mv " + f.secret + " pw; cat pw; mv pw " + f.secret,
		"cat " + filepath.Join(f.home, "keys", "id_rsa"),
		"cd " + filepath.Join(f.home, "keys") + " && cat ./id_rsa",
		"grep -r FAKE " + filepath.Join(f.home, ".ssh"),
		`python3 -c 'print(open("` + f.secret + `").read())' 2>&1 || cat "$(dirname ` + f.secret + `)/id_rsa"`,
	}
	for _, cmd := range reads {
		plain := f.tool(t, nil)
		res := call(t, plain, t.Context(), Args{Command: "rm -f pw; " + cmd})
		if !strings.Contains(res.Content, "id_rsa") && !strings.Contains(res.Content, secretText) {
			t.Fatalf("unconfined %q did not reach the key, so this case tests nothing: %s", cmd, res.Content)
		}
		boxed := f.tool(t, &Sandbox{})
		res = call(t, boxed, t.Context(), Args{Command: "rm -f pw; " + cmd})
		if strings.Contains(res.Content, secretText) || !res.IsError {
			t.Errorf("sandboxed %q: %s", cmd, res.Content)
		}
		// Landlock refuses a link or rename across directories with EXDEV,
		// so that tools fall back to copying, which it refuses in turn.
		if !strings.Contains(res.Content, "Permission denied") && !strings.Contains(res.Content, "PermissionError") &&
			!strings.Contains(res.Content, "Invalid cross-device link") {
			t.Errorf("sandboxed %q does not say the kernel refused: %s", cmd, res.Content)
		}
	}
	// The rest stays readable, and directories holding hidden paths stay
	// listable (names only, see the Sandbox doc): the sandbox hides, it
	// does not blind.
	res := call(t, f.tool(t, &Sandbox{}), t.Context(), Args{Command: "cat " + filepath.Join(f.home, "notes.txt") +
		" && ls /usr/bin >/dev/null && ls / >/dev/null && ls /etc >/dev/null && ls " + f.home + " && ls " + filepath.Join(f.home, ".ssh") + " && echo ok"})
	if res.IsError || !strings.Contains(res.Content, "plain notes") || !strings.Contains(res.Content, "notes.txt") || !strings.Contains(res.Content, "id_rsa\nok") {
		t.Errorf("reading or listing outside the hidden contents failed: %s", res.Content)
	}
}

// ADVERSARIAL 60, files: writes outside the workspace fail with the
// kernel's refusal and leave nothing; writes inside work.
func TestSandboxConfinesWrites(t *testing.T) {
	needLandlock(t, 1)
	f := newSandboxFixture(t)
	outside := filepath.Join(f.home, "x")
	tl := f.tool(t, &Sandbox{})
	res := call(t, tl, t.Context(), Args{Command: "touch " + outside})
	if !res.IsError || !strings.Contains(res.Content, "Permission denied") {
		t.Errorf("touch outside the workspace: %s", res.Content)
	}
	if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after a sandboxed touch (stat: %v)", outside, err)
	}
	res = call(t, tl, t.Context(), Args{Command: "echo x >> " + f.secret})
	if !res.IsError {
		t.Errorf("appending to the hidden key: %s", res.Content)
	}
	if b, _ := os.ReadFile(f.secret); string(b) != secretText+"\n" {
		t.Errorf("the key changed: %q", b)
	}
	res = call(t, tl, t.Context(), Args{Command: "mkdir -p a/b && echo hi > a/b/c && mv a/b/c a/d && cat a/d && echo gone > /dev/null && echo ok"})
	if res.IsError || !strings.Contains(res.Content, "hi\nok") {
		t.Errorf("writing inside the workspace failed: %s", res.Content)
	}

	// Write directories are writable; the process's own temp dir is not
	// (the test sandbox allows the workspace only).
	extra := t.TempDir()
	tl = f.tool(t, &Sandbox{Write: []string{extra}})
	res = call(t, tl, t.Context(), Args{Command: "echo y > " + filepath.Join(extra, "y") + " && cat " + filepath.Join(extra, "y")})
	if res.IsError || !strings.Contains(res.Content, "y\n") {
		t.Errorf("writing to a Write directory failed: %s", res.Content)
	}
}

// A workspace that holds a hidden path (loom started in the home
// directory) still hides it, and the rest stays writable.
func TestSandboxHidesInsideWorkspace(t *testing.T) {
	needLandlock(t, 1)
	f := newSandboxFixture(t)
	tl := newTestTool(t, &Config{Dir: f.home, Sandbox: &Sandbox{Hide: DefaultHidden(f.home), Write: []string{}}})
	res := call(t, tl, t.Context(), Args{Command: "cat .ssh/id_rsa"})
	if !res.IsError || strings.Contains(res.Content, secretText) {
		t.Errorf("the key inside the workspace was read: %s", res.Content)
	}
	res = call(t, tl, t.Context(), Args{Command: "echo n >> notes.txt && rm -f .ssh/id_rsa; ls .ssh 2>&1; echo done"})
	if !strings.Contains(res.Content, "done") {
		t.Errorf("writing next to the hidden directory failed: %s", res.Content)
	}
	if _, err := os.Stat(f.secret); err != nil {
		t.Errorf("the hidden key was removed: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.home, "notes.txt")); string(b) != "plain notes\nn\n" {
		t.Errorf("notes.txt = %q", b)
	}
}

// ADVERSARIAL 60, network: a TCP connection to a listener on loopback
// fails inside the sandbox and succeeds with Network set or unconfined.
func TestSandboxBlocksNetwork(t *testing.T) {
	needLandlock(t, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	accepted := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted++
			mu.Unlock()
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	connect := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected", port)
	count := func() int { mu.Lock(); defer mu.Unlock(); return accepted }
	f := newSandboxFixture(t)

	res := call(t, f.tool(t, &Sandbox{}), t.Context(), Args{Command: connect})
	if !res.IsError || strings.Contains(res.Content, "connected") {
		t.Errorf("sandboxed connect: %s", res.Content)
	}
	if n := count(); n != 0 {
		t.Errorf("the listener accepted %d connections from the sandbox", n)
	}
	res = call(t, f.tool(t, &Sandbox{}), t.Context(), Args{Command: "python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(); print(\"listening\")'"})
	if strings.Contains(res.Content, "listening") {
		t.Errorf("sandboxed listen: %s", res.Content)
	}
	for name, box := range map[string]*Sandbox{"network allowed": {Network: true}, "unconfined": nil} {
		before := count()
		res = call(t, f.tool(t, box), t.Context(), Args{Command: connect})
		if res.IsError || !strings.Contains(res.Content, "connected") {
			t.Errorf("%s connect: %s", name, res.Content)
		}
		deadline := time.Now().Add(5 * time.Second)
		for count() == before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if count() == before {
			t.Errorf("%s: the listener saw no connection", name)
		}
	}
}

// Confining a command must never confine loom: while sandboxed commands
// start, other goroutines keep reading the hidden file and starting
// unconfined programs that read it.
func TestSandboxLeavesTheProcessFree(t *testing.T) {
	needLandlock(t, 1)
	f := newSandboxFixture(t)
	tl := f.tool(t, &Sandbox{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failures sync.Map
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if b, err := os.ReadFile(f.secret); err != nil || !strings.HasPrefix(string(b), secretText) {
					failures.Store(fmt.Sprintf("reader %d read %d: %v", i, n, err), true)
				}
				if n%20 == 0 {
					out, err := exec.Command("cat", f.secret).CombinedOutput()
					if err != nil || !strings.HasPrefix(string(out), secretText) {
						failures.Store(fmt.Sprintf("reader %d: unconfined cat: %v %s", i, err, out), true)
					}
				}
			}
		}()
	}
	var calls sync.WaitGroup
	for range 8 {
		calls.Add(1)
		go func() {
			defer calls.Done()
			for range 5 {
				res := call(t, tl, t.Context(), Args{Command: "cat " + f.secret})
				if !res.IsError {
					failures.Store("a sandboxed cat read the key: "+res.Content, true)
				}
			}
		}()
	}
	calls.Wait()
	close(stop)
	wg.Wait()
	failures.Range(func(k, _ any) bool {
		t.Error(k)
		return true
	})
}

// The model is told what the sandbox blocks, and only when there is one.
func TestSandboxDescribed(t *testing.T) {
	needLandlock(t, 4)
	boxed := New(&Config{Sandbox: &Sandbox{}}).Spec().Description
	if !strings.Contains(boxed, "sandbox") || !strings.Contains(boxed, "network") {
		t.Errorf("sandboxed description: %s", boxed)
	}
	if open := New(&Config{Sandbox: &Sandbox{Network: true}}).Spec().Description; strings.Contains(open, "network connections") {
		t.Errorf("description with the network allowed: %s", open)
	}
	if plain := New(nil).Spec().Description; strings.Contains(plain, "sandbox") {
		t.Errorf("unsandboxed description mentions a sandbox: %s", plain)
	}
	if desc, ok := SandboxLevel(); !ok || !strings.Contains(desc, "network") {
		t.Errorf("SandboxLevel() = %q, %v", desc, ok)
	}
}
