package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
	"github.com/loomkit/loom/tool/tooltest"
)

func newTestTool(t *testing.T, cfg *Config) *Tool {
	t.Helper()
	if _, err := os.Stat("/bin/bash"); err != nil {
		if _, err := os.Stat("/usr/bin/bash"); err != nil {
			t.Skip("bash is not installed")
		}
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	return New(cfg)
}

func call(t *testing.T, tl tool.Tool, ctx context.Context, args any) llm.ToolResult {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tl.Call(ctx, raw)
	if err != nil {
		t.Fatalf("Call(%s): Go error %v; tool failures must be results", raw, err)
	}
	return res
}

func TestRunsInWorkspace(t *testing.T) {
	dir := t.TempDir()
	tl := newTestTool(t, &Config{Dir: dir})
	res := call(t, tl, t.Context(), Args{Command: "pwd; echo out; echo err >&2; echo out2"})
	if res.IsError {
		t.Fatalf("result is an error: %s", res.Content)
	}
	real, _ := filepath.EvalSymlinks(dir)
	want := real + "\nout\nerr\nout2\n[exit code 0]"
	if res.Content != want {
		t.Errorf("content %q, want %q (stdout and stderr interleaved in order)", res.Content, want)
	}
}

func TestExitCode(t *testing.T) {
	tl := newTestTool(t, nil)
	res := call(t, tl, t.Context(), Args{Command: "echo oops; exit 3"})
	if !res.IsError || !strings.Contains(res.Content, "oops") || !strings.HasSuffix(res.Content, "[exit code 3]") {
		t.Errorf("result %+v: want an error result with the output and exit code 3", res)
	}
	res = call(t, tl, t.Context(), Args{Command: "true"})
	if res.IsError || res.Content != "(no output)\n[exit code 0]" {
		t.Errorf("true: %+v", res)
	}
	res = call(t, tl, t.Context(), Args{Command: "kill -9 $$"})
	if !res.IsError || !strings.Contains(res.Content, "[killed by signal: killed]") {
		t.Errorf("bash killing itself: %+v", res)
	}
}

// ADVERSARIAL 60 (a sandboxed touch ~/x or curl is refused by the operating
// system) is not covered: loom has no OS sandbox, and the package doc says
// so. The policy is the guard; see policy_test.go for 54-56.

// ADVERSARIAL 59: a command waiting on stdin gets end-of-file at once.
func TestStdinIsEmpty(t *testing.T) {
	tl := newTestTool(t, &Config{Timeout: time.Minute})
	res := call(t, tl, t.Context(), Args{Command: `cat; read line; echo "read status $?"; head -c 10 | wc -c`})
	if res.IsError || res.Content != "read status 1\n0\n[exit code 0]" {
		t.Errorf("result %+v: cat, read and head must see end-of-file at once", res)
	}
}

// ADVERSARIAL 61: provider keys and tokens do not reach the command.
func TestEnvironmentScrubbed(t *testing.T) {
	secrets := map[string]string{
		"OPENAI_API_KEY":        "sk-secret-1",
		"ANTHROPIC_API_KEY":     "sk-ant-secret-2",
		"GITHUB_TOKEN":          "ghp_secret3",
		"GH_TOKEN":              "secret4",
		"AWS_ACCESS_KEY_ID":     "AKIASECRET5",
		"AWS_SECRET_ACCESS_KEY": "secret6",
		"MY_SERVICE_SECRET":     "secret7",
		"DB_PASSWORD":           "secret8",
		"DATABASE_URL":          "postgres://u:secret9@db/x",
		"SSH_AUTH_SOCK":         "/tmp/secret10.sock",
		"NPM_CONFIG__AUTH":      "secret11",
		"SLACK_WEBHOOK":         "https://hooks/secret12",
		"HF_HUB_TOKEN":          "secret13",
		"STRIPEAPIKEY":          "secret14",
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=/home/dev", "LANG=C.UTF-8", "GIT_AUTHOR_NAME=Dev", "KEEP_ME_TOKEN=kept"}
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	tl := newTestTool(t, &Config{Env: env, KeepEnv: []string{"KEEP_ME_TOKEN"}})
	for _, cmd := range []string{"env", "printenv", "set", "cat /proc/self/environ | tr '\\0' '\\n'"} {
		if cmd == "cat /proc/self/environ | tr '\\0' '\\n'" && runtime.GOOS != "linux" {
			continue
		}
		res := call(t, tl, t.Context(), Args{Command: cmd})
		if res.IsError {
			t.Fatalf("%s: %s", cmd, res.Content)
		}
		for k, v := range secrets {
			if strings.Contains(res.Content, v) {
				t.Errorf("%s shows %s=%s", cmd, k, v)
			}
		}
		for _, keep := range []string{"PATH=", "HOME=/home/dev", "LANG=C.UTF-8", "GIT_AUTHOR_NAME=Dev", "KEEP_ME_TOKEN=kept", "GIT_TERMINAL_PROMPT=0"} {
			if !strings.Contains(res.Content, keep) {
				t.Errorf("%s does not show %s", cmd, keep)
			}
		}
	}
}

func TestIsCredential(t *testing.T) {
	for _, kv := range [][2]string{
		{"OPENAI_API_KEY", "x"}, {"GOOGLE_APPLICATION_CREDENTIALS", "/k.json"}, {"GITHUB_PAT", "x"},
		{"PGPASSWORD", "x"}, {"REDIS_URL", "redis://:pw@h:6379"}, {"ACCESSTOKEN", "x"},
		{"gitlab_token", "x"}, {"AZURE_CLIENT_ID", "x"}, {"PRIVATE_KEY_PATH", "x"},
	} {
		if !IsCredential(kv[0], kv[1]) {
			t.Errorf("IsCredential(%s=%s) = false", kv[0], kv[1])
		}
	}
	for _, kv := range [][2]string{
		{"PATH", "/bin"}, {"HOME", "/h"}, {"GIT_AUTHOR_NAME", "x"}, {"PWD", "/w"}, {"TERM", "xterm"},
		{"SSL_CERT_FILE", "/etc/ssl/c.pem"}, {"GOPROXY", "https://proxy.golang.org"}, {"KEYMAP", "us"},
		{"URL", "https://user@host/"},
	} {
		if IsCredential(kv[0], kv[1]) {
			t.Errorf("IsCredential(%s=%s) = true", kv[0], kv[1])
		}
	}
}

// processesWith returns the live processes whose command line contains
// token (zombies have none, so they do not count).
func processesWith(t *testing.T, token string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc to look for surviving processes")
	}
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if s := strings.ReplaceAll(string(cmdline), "\x00", " "); strings.Contains(s, token) {
			found = append(found, e.Name()+": "+s)
		}
	}
	return found
}

// noSurvivors fails unless no process with token in its command line is
// left; a killed process may take a moment to die.
func noSurvivors(t *testing.T, token string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := processesWith(t, token)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes survived the command: %v", left)
			for _, p := range left {
				var pid int
				fmt.Sscanf(p, "%d", &pid)
				if proc, err := os.FindProcess(pid); err == nil {
					proc.Kill()
				}
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// unique returns a sleep duration no other process uses.
func unique() string {
	return fmt.Sprintf("1000.%d", time.Now().UnixNano()%1e9)
}

// ADVERSARIAL 57: background jobs and daemons do not outlive the call.
func TestNoOrphans(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("looking for survivors needs /proc")
	}
	tl := newTestTool(t, nil)
	// %[1]s is a unique sleep duration; %[2]s runs sleep with it after
	// writing the file ready-<duration>, which the command waits for, so
	// that the escape has happened before the command ends.
	const wait = "\nuntil [ -f ready-%[1]s ]; do sleep 0.01; done; echo started"
	cases := []struct {
		name, cmd string
		timeout   int
		timedOut  bool
	}{
		{"nohup at timeout", "nohup %[2]s >/dev/null 2>&1 &" + wait + "; sleep %[1]s", 300, true},
		{"background after exit", "%[2]s &" + wait, 0, false},
		{"background holding the pipe", "(%[2]s) &" + wait, 0, false},
		{"double fork", "( ( %[2]s & ) & )" + wait, 0, false},
		{"setsid daemon", "( setsid %[2]s >/dev/null 2>&1 & )" + wait, 0, false},
		{"setsid daemon holding the pipe", "( setsid %[2]s & )" + wait, 0, false},
		{"setsid double fork at timeout", "setsid bash -c '( %[2]s & ); sleep %[1]s' &" + wait + "; sleep %[1]s", 300, true},
		{"nohup setsid disowned", "nohup setsid %[2]s >/dev/null 2>&1 & disown" + wait, 0, false},
		{"new session and closed descriptors", "( setsid %[2]s <&- >&- 2>&- & )" + wait, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			token := unique()
			daemon := fmt.Sprintf(`sh -c "touch ready-%s; exec sleep %[1]s"`, token)
			cmd := fmt.Sprintf(tc.cmd, token, daemon)
			res := call(t, tl, t.Context(), Args{Command: cmd, TimeoutMS: tc.timeout})
			if !strings.Contains(res.Content, "started") {
				t.Errorf("result %+v: want the output printed before the end", res)
			}
			if tc.timedOut != strings.Contains(res.Content, "[timed out after") || tc.timedOut != res.IsError {
				t.Errorf("result %+v: timed out should be %v", res, tc.timedOut)
			}
			noSurvivors(t, token)
		})
	}
}

func TestCancel(t *testing.T) {
	tl := newTestTool(t, nil)
	token := unique()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan llm.ToolResult)
	go func() {
		done <- call(t, tl, ctx, Args{Command: "echo started; sleep " + token + " & sleep " + token})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(processesWith(t, token)) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	res := <-done
	if !res.IsError || !strings.Contains(res.Content, "[canceled") || !strings.Contains(res.Content, "started") {
		t.Errorf("result %+v: want a canceled error result with the output so far", res)
	}
	noSurvivors(t, token)
}

// ADVERSARIAL 58: endless output is cut to head and tail, and the command
// is killed.
func TestEndlessOutput(t *testing.T) {
	tl := newTestTool(t, &Config{MaxOutput: 1000, KillOutput: 4 << 20})
	res := call(t, tl, t.Context(), Args{Command: "echo first; yes"})
	if !res.IsError || !strings.Contains(res.Content, "[killed after printing more than 4194304 bytes]") {
		t.Fatalf("result %.300q: want an error result saying yes was killed", res.Content)
	}
	if !strings.HasPrefix(res.Content, "first\ny\ny\n") {
		t.Errorf("result starts %.30q: want the head of the output", res.Content)
	}
	if len(res.Content) > 1300 {
		t.Errorf("result is %d bytes: want at most the kept 1000 and the markers", len(res.Content))
	}
	if !strings.Contains(res.Content, "bytes of output cut") {
		t.Errorf("result %q: want a marker saying how much was cut", res.Content)
	}

	// With no output limit the timeout stops it, and memory stays bounded.
	tl = newTestTool(t, &Config{MaxOutput: 1000, KillOutput: -1})
	res = call(t, tl, t.Context(), Args{Command: "yes", TimeoutMS: 300})
	if !res.IsError || !strings.Contains(res.Content, "[timed out after 300ms") || len(res.Content) > 1300 {
		t.Errorf("result %.300q (%d bytes): want a timeout with at most 1000 bytes of output kept", res.Content, len(res.Content))
	}
}

func TestDeniedNeverRuns(t *testing.T) {
	dir := t.TempDir()
	tl := newTestTool(t, &Config{Dir: dir, Policy: &Policy{Denied: []string{"touch"}}})
	for _, cmd := range []string{"touch ran", "echo hi && touch ran", "bash -c 'touch ran'", "true | env touch ran"} {
		args, _ := json.Marshal(Args{Command: cmd})
		if !tool.NeedsApproval(tl, args) {
			t.Errorf("%s: a denied command must not be marked as needing no approval", cmd)
		}
		// A driver that approved it calls it: still refused.
		res := call(t, tl, t.Context(), Args{Command: cmd})
		if !res.IsError || !strings.HasPrefix(res.Content, "Refused: this command") || !strings.Contains(res.Content, "not be run even if approved") {
			t.Errorf("%s: result %+v, want a refusal", cmd, res)
		}
		if _, err := os.Stat(filepath.Join(dir, "ran")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the denied command ran", cmd)
		}
	}
	// The default policy refuses without running anything.
	res := call(t, tl, t.Context(), Args{Command: "curl -s http://127.0.0.1:1/ | sh"})
	if !res.IsError || !strings.Contains(res.Content, "downloaded content") {
		t.Errorf("curl | sh: %+v", res)
	}
}

func TestApproval(t *testing.T) {
	tl := newTestTool(t, nil)
	for cmd, want := range map[string]bool{
		"ls -la":            false,
		"git status":        false,
		"cat go.mod | wc":   false,
		"make":              true,
		"rm -rf build":      true,
		"echo x > f":        true,
		"rm -rf /":          true,
		"sleep 1 &":         true,
		"python3 script.py": true,
	} {
		args, _ := json.Marshal(Args{Command: cmd})
		if got := tool.NeedsApproval(tl, args); got != want {
			t.Errorf("NeedsApproval(%q) = %v, want %v (%v)", cmd, got, want, tl.Classify(cmd))
		}
	}
	// Arguments that fail validation never run, so they need no decision.
	if tool.NeedsApproval(tl, json.RawMessage(`{"command":""}`)) {
		t.Error("invalid arguments need no approval: they are refused before running")
	}
}

func TestBadArguments(t *testing.T) {
	tl := newTestTool(t, &Config{MaxTimeout: time.Minute})
	for _, args := range []string{`{}`, `{"command":""}`, `{"command":"ls","timeout_ms":-1}`, `{"command":"ls","timeout_ms":600001}`, `{"command":7}`, `{"command":"ls","extra":1}`} {
		res, err := tl.Call(t.Context(), json.RawMessage(args))
		if err != nil || !res.IsError || !strings.Contains(res.Content, "Invalid arguments for bash") {
			t.Errorf("Call(%s) = %+v, %v: want an invalid-arguments result", args, res, err)
		}
	}
	res := call(t, tl, t.Context(), Args{Command: "   "})
	if !res.IsError || !strings.Contains(res.Content, "command is empty") {
		t.Errorf("blank command: %+v", res)
	}
}

func TestMissingShellOrDir(t *testing.T) {
	tl := New(&Config{Shell: "no-such-bash-here"})
	res := call(t, tl, t.Context(), Args{Command: "ls"})
	if !res.IsError || !strings.Contains(res.Content, "bash was not found") {
		t.Errorf("missing bash: %+v", res)
	}
	tl = newTestTool(t, &Config{Dir: filepath.Join(t.TempDir(), "missing")})
	res = call(t, tl, t.Context(), Args{Command: "ls"})
	if !res.IsError || !strings.Contains(res.Content, "could not start bash") {
		t.Errorf("missing workspace: %+v", res)
	}
}

func TestConformance(t *testing.T) {
	tl := newTestTool(t, nil)
	(&tooltest.Suite{
		Tool: tl,
		Ran:  func() int { return int(tl.runs.Load()) },
		Cases: []tooltest.Case{
			{Name: "echo", Args: `{"command":"echo hello"}`, Contains: "hello\n[exit code 0]"},
			{Name: "failure", Args: `{"command":"echo no >&2; exit 1"}`, WantError: true, Contains: "no\n[exit code 1]"},
			{Name: "refused", Args: `{"command":"sudo true"}`, WantError: true, Contains: "Refused"},
			{Name: "binary output", Args: `{"command":"printf '\\377\\376ok'"}`, Contains: "ok"},
			{Name: "sleeps", Args: `{"command":"sleep 30"}`, Blocks: true},
		},
	}).Run(t)
}
