package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/tool/shell"
)

// sandboxHarness is a harness for sandbox tests, or a skip where the
// kernel has no sandbox. Its temp dir is its own, so that the sandbox's
// writable temp dir does not hold the home.
func sandboxHarness(t *testing.T, turns ...loomtest.Turn) *harness {
	t.Helper()
	if desc, ok := shell.SandboxLevel(); !ok {
		t.Skipf("no sandbox on this kernel: %s", desc)
	}
	h := newHarness(t, loomtest.Config{Turns: turns})
	h.env["TMPDIR"] = t.TempDir()
	return h
}

// loom confines bash by default where the kernel can: a model's command
// cannot write outside the workspace or read a key through a link it made,
// even approved with --yes; --sandbox off lifts it (so the test can fail).
func TestSandboxByDefault(t *testing.T) {
	for _, mode := range []string{"default", "off"} {
		t.Run(mode, func(t *testing.T) {
			h := sandboxHarness(t,
				bash("c1", "touch \"$HOME/escaped\""),
				bash("c2", "ln -s \"$HOME/.ssh/id_rsa\" k && cat k"),
				loomtest.Text("tried"))
			if err := os.MkdirAll(filepath.Join(h.home, ".ssh"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(h.home, ".ssh", "id_rsa"), []byte("FAKE-KEY-19af\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"run", "--yes", "--output", "jsonl", "escape"}
			if mode == "off" {
				args = append(args, "--sandbox", "off")
			}
			r := h.run(args...).want(t, 0)
			results := ofType(lines(t, r.stdout), "tool_result")
			if len(results) != 2 {
				t.Fatalf("tool results: %v", results)
			}
			_, err := os.Stat(filepath.Join(h.home, "escaped"))
			leaked := strings.Contains(results[1]["content"].(string), "FAKE-KEY-19af")
			if mode == "off" {
				if err != nil || !leaked {
					t.Fatalf("unconfined, the commands did not escape (stat %v, results %v): the test checks nothing", err, results)
				}
				return
			}
			if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the sandboxed touch made a file outside the workspace (stat: %v)", err)
			}
			if leaked {
				t.Errorf("the sandboxed cat read the key: %v", results[1])
			}
			for _, res := range results {
				if res["is_error"] != true || !strings.Contains(res["content"].(string), "Permission denied") {
					t.Errorf("result %v, want the kernel's refusal", res)
				}
			}
		})
	}
}

func TestSandboxFlagRefusesUnknownModes(t *testing.T) {
	h := newHarness(t, loomtest.Config{})
	r := h.run("run", "--sandbox", "maybe", "x").want(t, 2)
	if !strings.Contains(r.stderr, `"maybe" is not a sandbox mode`) {
		t.Errorf("stderr: %s", r.stderr)
	}
}

// loom resume keeps the run's sandbox: a run started with --sandbox off
// resumes unconfined (and under the same tool specs, which the resume
// check compares), one started sandboxed stays sandboxed.
func TestResumeKeepsSandbox(t *testing.T) {
	for _, mode := range []string{"auto", "off"} {
		t.Run(mode, func(t *testing.T) {
			h := sandboxHarness(t,
				bash("c1", "touch started && sleep 37"),
				bash("c2", "touch \"$HOME/escaped\""),
				loomtest.Text("done"))
			r := h.start("run", "--yes", "--sandbox", mode, "--output", "jsonl", "wait")
			id := startedRunID(t, r)
			waitFile(t, filepath.Join(h.ws, "started"))
			r.cmd.Process.Signal(syscall.SIGINT)
			r.wait(t).want(t, 130)

			res := h.run("resume", "--yes", "--output", "jsonl", id).want(t, 0)
			results := ofType(lines(t, res.stdout), "tool_result")
			_, err := os.Stat(filepath.Join(h.home, "escaped"))
			if mode == "off" && (err != nil || len(results) != 1 || results[0]["is_error"] == true) {
				t.Errorf("resumed unconfined run: stat %v, results %v", err, results)
			}
			if mode == "auto" && (!errors.Is(err, os.ErrNotExist) || len(results) != 1 || results[0]["is_error"] != true) {
				t.Errorf("resumed sandboxed run escaped: stat %v, results %v", err, results)
			}
		})
	}
}

// --sandbox-write opens one more directory to sandboxed commands, and
// only that one.
func TestSandboxWriteFlag(t *testing.T) {
	h := sandboxHarness(t,
		bash("c1", "touch \"$HOME/extra/made\" && touch \"$HOME/elsewhere\""),
		loomtest.Text("ok"))
	extra := filepath.Join(h.home, "extra")
	if err := os.Mkdir(extra, 0o755); err != nil {
		t.Fatal(err)
	}
	r := h.run("run", "--yes", "--output", "jsonl", "--sandbox-write", extra, "write").want(t, 0)
	res := ofType(lines(t, r.stdout), "tool_result")
	if _, err := os.Stat(filepath.Join(extra, "made")); err != nil {
		t.Errorf("the --sandbox-write directory was not writable: %v %v", err, res)
	}
	if _, err := os.Stat(filepath.Join(h.home, "elsewhere")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a write next to it got through: %v", err)
	}
	if len(res) != 1 || res[0]["is_error"] != true {
		t.Errorf("results %v", res)
	}
}
