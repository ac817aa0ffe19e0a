//go:build unix

package sqlite

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomkit/loom/store"
)

// Child processes: the test binary re-executed with childEnv set runs one of
// the roles below instead of the tests, talking to its parent on stdout.
const childEnv = "LOOM_STORE_SQLITE_CHILD"

// childMain runs the child role named by childEnv, if any, and exits.
func childMain() {
	if role := os.Getenv(childEnv); role != "" {
		if err := runChild(role, os.Getenv("LOOM_CHILD_DB"), os.Getenv("LOOM_CHILD_ARG")); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
}

func runChild(role, path, arg string) error {
	s, err := Open(path, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	switch role {
	case "append":
		// Append pairs of records to run "r" forever, saying each committed
		// sequence only after Append returned.
		info, err := s.Get(ctx, "r")
		if err != nil {
			return err
		}
		last := info.LastSeq
		rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(last)))
		for {
			a, b := checkedPayload(last+1, rng), checkedPayload(last+2, rng)
			last, err = s.Append(ctx, "r", last,
				store.Record{Kind: store.KindToolIntent, Data: a}, store.Record{Kind: store.KindToolResult, Data: b})
			if err != nil {
				return err
			}
			say("committed %d", last)
		}
	case "race":
		// Append n tagged records to run "r", retrying lost races.
		n, _ := strconv.Atoi(arg)
		say("ready")
		for won := 0; won < n; {
			info, err := s.Get(ctx, "r")
			if err != nil {
				return err
			}
			seq, err := s.Append(ctx, "r", info.LastSeq, note(fmt.Sprintf(`{"pid":%d,"n":%d}`, os.Getpid(), won)))
			if errors.Is(err, store.ErrConflict) {
				continue
			}
			if err != nil {
				return err
			}
			say("won %d %d", seq, won)
			won++
		}
	case "fsize":
		// Append 32 KiB records to run "r" under a file size limit (a disk
		// that fills up) until a write fails; say each commit and the error.
		limit, _ := strconv.ParseUint(arg, 10, 64)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
			return err
		}
		info, err := s.Get(ctx, "r")
		if err != nil {
			return err
		}
		last := info.LastSeq
		pad := note(`"` + strings.Repeat("f", 32<<10) + `"`)
		for {
			n, err := s.Append(ctx, "r", last, pad, note(`"pair"`))
			if err != nil {
				say("error %v", err)
				return nil
			}
			last = n
			say("committed %d", last)
		}
	case "claim":
		// Claim run arg, say so, hold it until stdin closes, release.
		owner := fmt.Sprintf("child-%d", os.Getpid())
		if err := s.Claim(ctx, arg, owner, time.Hour); err != nil {
			say("refused %v", err)
			return nil
		}
		say("claimed %s", owner)
		io.Copy(io.Discard, os.Stdin)
		if err := s.Release(ctx, arg, owner); err != nil {
			return err
		}
		say("released")
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return nil
}

// checkedPayload is a record body that proves itself intact: a seq, padding
// of random length and the padding's hash.
func checkedPayload(seq int64, rng *rand.Rand) []byte {
	pad := strings.Repeat(strconv.Itoa(int(seq%10)), 1+rng.IntN(96<<10))
	sum := sha256.Sum256([]byte(pad))
	b, _ := json.Marshal(map[string]any{"seq": seq, "pad": pad, "sum": hex.EncodeToString(sum[:])})
	return b
}

func checkPayload(r store.Record) error {
	var p struct {
		Seq int64
		Pad string
		Sum string
	}
	if err := json.Unmarshal(r.Data, &p); err != nil {
		return fmt.Errorf("record %d: %v", r.Seq, err)
	}
	sum := sha256.Sum256([]byte(p.Pad))
	if p.Seq != r.Seq || p.Sum != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("record %d is torn: it says seq %d, padding hash matches: %v", r.Seq, p.Seq, p.Sum == hex.EncodeToString(sum[:]))
	}
	return nil
}

type child struct {
	cmd   *exec.Cmd
	lines chan string
	stdin io.WriteCloser
	errb  *strings.Builder
}

func startChild(t *testing.T, role, path, arg string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, "LOOM_CHILD_DB="+path, "LOOM_CHILD_ARG="+arg)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	errb := &strings.Builder{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 1024), stdin: stdin, errb: errb}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	return c
}

// next returns the child's next line, failing the test if the child ends or
// says nothing for a minute.
func (c *child) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatalf("child ended early: %v\n%s", c.cmd.Wait(), c.errb)
		}
		return l
	case <-time.After(time.Minute):
		t.Fatalf("child said nothing for a minute\n%s", c.errb)
	}
	return ""
}

// kill -9 in the middle of a stream of commits: the database opens cleanly,
// every append the child was told succeeded is there and intact, and no
// batch is half visible. ADVERSARIAL 75.
func TestKillDuringCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "loom.db")
	s := mustOpen(t, path)
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{})); err != nil {
		t.Fatal(err)
	}
	s.Close()

	rng := rand.New(rand.NewPCG(1, 2))
	var reported int64 = 1
	for round := range 12 {
		c := startChild(t, "append", path, "")
		commits := 1 + rng.IntN(12)
		for range commits {
			l := c.next(t)
			n, err := strconv.ParseInt(strings.TrimPrefix(l, "committed "), 10, 64)
			if err != nil {
				t.Fatalf("child said %q", l)
			}
			reported = n
		}
		// Kill at a random moment of the next commits, often mid-commit.
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.cmd.Wait()
		for l := range c.lines { // lines written before the kill
			if n, err := strconv.ParseInt(strings.TrimPrefix(l, "committed "), 10, 64); err == nil {
				reported = n
			}
		}

		s := mustOpen(t, path)
		info, err := s.Get(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if info.LastSeq < reported {
			t.Fatalf("round %d: the child was told record %d was saved, but the journal ends at %d", round, reported, info.LastSeq)
		}
		if (info.LastSeq-1)%2 != 0 {
			t.Fatalf("round %d: the journal ends at %d, inside a two-record batch", round, info.LastSeq)
		}
		recs := checkIntact(t, s, "r", info.LastSeq)
		for _, r := range recs[1:] {
			if err := checkPayload(r); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		t.Logf("round %d: killed after %d reported commits; journal ends at %d (last reported %d)", round, commits, info.LastSeq, reported)
		reported = info.LastSeq
		s.Close()
	}
}

// A disk that fills up under a real write (a file size limit makes the
// kernel refuse it with EFBIG): the append fails with an explicit error,
// nothing unreported is half saved, and the database opens cleanly after.
// ADVERSARIAL 77.
func TestFileSizeLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "loom.db")
	s := mustOpen(t, path)
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{})); err != nil {
		t.Fatal(err)
	}
	s.Close()
	c := startChild(t, "fsize", path, strconv.Itoa(512<<10))
	var reported int64 = 1
	var failure string
	for failure == "" {
		l := c.next(t)
		if msg, ok := strings.CutPrefix(l, "error "); ok {
			failure = msg
			break
		}
		n, err := strconv.ParseInt(strings.TrimPrefix(l, "committed "), 10, 64)
		if err != nil {
			t.Fatalf("child said %q", l)
		}
		reported = n
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, c.errb)
	}
	t.Logf("after %d records: %s", reported, failure)
	if reported < 5 {
		t.Fatalf("the limit hit after only %d records; the test is not exercising appends", reported)
	}
	if !strings.Contains(failure, `append to run "r"`) || !strings.Contains(failure, "saved") {
		t.Errorf("error %q does not say which append failed and what was saved", failure)
	}
	s = mustOpen(t, path)
	info, err := s.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case info.LastSeq == reported:
	case info.LastSeq == reported+2 && strings.Contains(failure, "may or may not"):
		// The commit failed after reaching the disk; the error said so.
	default:
		t.Fatalf("the journal ends at %d, but the last append reported saved ended at %d and the error was %q", info.LastSeq, reported, failure)
	}
	checkIntact(t, s, "r", info.LastSeq)
	if _, err := s.Append(ctx, "r", info.LastSeq, note(`"after"`)); err != nil {
		t.Fatalf("append once there is room: %v", err)
	}
}

// Two processes appending to one run: every sequence is won by exactly one
// of them, and nothing is lost or duplicated. ADVERSARIAL 76.
func TestTwoProcessesAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "loom.db")
	s := mustOpen(t, path)
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{})); err != nil {
		t.Fatal(err)
	}
	const each = 25
	children := []*child{startChild(t, "race", path, strconv.Itoa(each)), startChild(t, "race", path, strconv.Itoa(each))}
	type win struct {
		pid, n int
	}
	wins := map[int64]win{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range children {
		if l := c.next(t); l != "ready" {
			t.Fatalf("child said %q", l)
		}
	}
	for _, c := range children {
		wg.Go(func() {
			for l := range c.lines {
				var seq int64
				var n int
				if _, err := fmt.Sscanf(l, "won %d %d", &seq, &n); err != nil {
					t.Errorf("child said %q", l)
					return
				}
				mu.Lock()
				if prev, dup := wins[seq]; dup {
					t.Errorf("seq %d won by pid %d and pid %d", seq, prev.pid, c.cmd.Process.Pid)
				}
				wins[seq] = win{c.cmd.Process.Pid, n}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child: %v\n%s", err, c.errb)
		}
	}
	recs := checkIntact(t, s, "r", 1+2*each)
	for _, r := range recs[1:] {
		w, ok := wins[r.Seq]
		if !ok {
			t.Fatalf("record %d is in the journal but no process was told it won it", r.Seq)
		}
		if want := fmt.Sprintf(`{"pid":%d,"n":%d}`, w.pid, w.n); string(r.Data) != want {
			t.Fatalf("record %d holds %s, but its winner appended %s", r.Seq, r.Data, want)
		}
	}
}

// Two processes resuming one run: the second is refused with an error naming
// the first, and gets the run once the first lets go.
func TestTwoProcessesClaim(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "loom.db")
	s := mustOpen(t, path)
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{})); err != nil {
		t.Fatal(err)
	}
	first := startChild(t, "claim", path, "r")
	l := first.next(t)
	owner, ok := strings.CutPrefix(l, "claimed ")
	if !ok {
		t.Fatalf("first child said %q", l)
	}
	// Another process is refused, naming the holder.
	second := startChild(t, "claim", path, "r")
	if l := second.next(t); !strings.HasPrefix(l, "refused ") || !strings.Contains(l, owner) {
		t.Fatalf("second child said %q, want a refusal naming %s", l, owner)
	}
	// So is this process.
	err := s.Claim(ctx, "r", "parent", time.Minute)
	var ce *store.ClaimedError
	if !errors.As(err, &ce) || ce.Owner != owner {
		t.Fatalf("parent claim: %v, want a *ClaimedError naming %s", err, owner)
	}
	if info, err := s.Get(ctx, "r"); err != nil || info.Owner != owner || info.Status != store.StatusRunning {
		t.Fatalf("while claimed: %+v, %v", info, err)
	}
	first.stdin.Close()
	if l := first.next(t); l != "released" {
		t.Fatalf("first child said %q", l)
	}
	if err := s.Claim(ctx, "r", "parent", time.Minute); err != nil {
		t.Fatalf("claim after the holder released: %v", err)
	}
}

// Two handles on one file in one process behave like two processes: the
// sequence check and claims hold across them.
func TestTwoHandlesOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	a, b := mustOpen(t, path), mustOpen(t, path)
	last, err := a.Append(ctx, "r", 0, created(t, store.RunHeader{}))
	if err != nil {
		t.Fatal(err)
	}
	const each = 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := map[int64]string{}
	for name, s := range map[string]*Store{"a": a, "b": b} {
		wg.Go(func() {
			for n := 0; n < each; {
				info, err := s.Get(ctx, "r")
				if err != nil {
					t.Error(err)
					return
				}
				seq, err := s.Append(ctx, "r", info.LastSeq, note(fmt.Sprintf(`"%s%d"`, name, n)))
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				winners[seq] = fmt.Sprintf(`"%s%d"`, name, n)
				mu.Unlock()
				n++
			}
		})
	}
	wg.Wait()
	recs := checkIntact(t, b, "r", last+2*each)
	for _, r := range recs[1:] {
		if winners[r.Seq] != string(r.Data) {
			t.Fatalf("record %d holds %s, its winner appended %s", r.Seq, r.Data, winners[r.Seq])
		}
	}
	if err := a.Claim(ctx, "r", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(ctx, "r", "b", time.Minute); !errors.Is(err, store.ErrClaimed) {
		t.Fatalf("claim through the second handle: %v, want ErrClaimed", err)
	}
}
