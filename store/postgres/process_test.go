package postgres

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomkit/loom/store"
)

// Child processes: the test binary re-executed with childEnv set runs one
// of the roles below instead of the tests, on its own pool, and talks to
// its parent on stdout. They stand for loom processes on other machines.
const childEnv = "LOOM_STORE_POSTGRES_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		if err := runChild(role, os.Getenv("LOOM_CHILD_SCHEMA"), os.Getenv("LOOM_CHILD_ARG")); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runChild(role, schema, arg string) error {
	s, err := Open(ctx, os.Getenv("LOOM_POSTGRES_URL"), &Options{Schema: schema})
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
	case "blobs":
		// Put the blobs numbered 0 to n-1 (blobData), saying each key.
		n, _ := strconv.Atoi(arg)
		say("ready")
		for i := range n {
			data := blobData(i)
			key := blobKey(data)
			if err := s.Blobs().Put(ctx, key, data); err != nil {
				return err
			}
			say("put %s", key)
		}
	case "get":
		// Get each key read from stdin, saying its length.
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			data, err := s.Blobs().Get(ctx, sc.Text())
			if err != nil {
				say("error %v", err)
				continue
			}
			say("got %d", len(data))
		}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return nil
}

// blobData is the i-th test blob: distinct, and of varied sizes.
func blobData(i int) []byte {
	return []byte(strings.Repeat(fmt.Sprintf("blob %d;", i), 1+i*37%500))
}

type child struct {
	cmd   *exec.Cmd
	lines chan string
	stdin io.WriteCloser
	errb  *strings.Builder
}

func startChild(t *testing.T, role, schema, arg string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, "LOOM_CHILD_SCHEMA="+schema, "LOOM_CHILD_ARG="+arg)
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

// checkIntact loads run id and checks it holds want records numbered 1 to
// want.
func checkIntact(t *testing.T, s *Store, id string, want int64) []store.Record {
	t.Helper()
	recs, err := s.Load(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(recs)) != want {
		t.Fatalf("run %s has %d records, want %d", id, len(recs), want)
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
	if info, err := s.Get(ctx, id); err != nil || info.LastSeq != want {
		t.Fatalf("run %s summary: %+v, %v; want last seq %d", id, info, err, want)
	}
	return recs
}

// Two processes, each with its own pool, appending to one run as fast as
// they can: every sequence is won by exactly one of them, and nothing is
// lost or duplicated.
func TestTwoProcessesAppend(t *testing.T) {
	schema := newSchema(t)
	s := openSchema(t, schema, nil)
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{})); err != nil {
		t.Fatal(err)
	}
	const each = 40
	children := []*child{startChild(t, "race", schema, strconv.Itoa(each)), startChild(t, "race", schema, strconv.Itoa(each))}
	for _, c := range children {
		if l := c.next(t); l != "ready" {
			t.Fatalf("child said %q\n%s", l, c.errb)
		}
	}
	type win struct{ pid, n int }
	wins := map[int64]win{}
	var mu sync.Mutex
	var wg sync.WaitGroup
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
	schema := newSchema(t)
	s := openSchema(t, schema, nil)
	if _, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{})); err != nil {
		t.Fatal(err)
	}
	first := startChild(t, "claim", schema, "r")
	l := first.next(t)
	owner, ok := strings.CutPrefix(l, "claimed ")
	if !ok {
		t.Fatalf("first child said %q", l)
	}
	second := startChild(t, "claim", schema, "r")
	if l := second.next(t); !strings.HasPrefix(l, "refused ") || !strings.Contains(l, owner) {
		t.Fatalf("second child said %q, want a refusal naming %s", l, owner)
	}
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

// Two pools in one process hammering one run from several goroutines each:
// exactly one writer wins each sequence, the journal is dense, and each
// record holds what its winner appended. Each pool's summary cache goes
// stale whenever the other pool wins, which is what this exercises.
func TestTwoPoolsHammerOneRun(t *testing.T) {
	schema := newSchema(t)
	a, b := openSchema(t, schema, nil), openSchema(t, schema, nil)
	last, err := a.Append(ctx, "r", 0, created(t, store.RunHeader{}))
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 4, 15
	var mu sync.Mutex
	winners := map[int64]string{}
	conflicts := 0
	var wg sync.WaitGroup
	for name, s := range map[string]*Store{"a": a, "b": b} {
		for g := range goroutines {
			wg.Go(func() {
				// Each writer appends after the sequence its own last win
				// returned, or after what Get says when it lost: the
				// first is what a driver does, and meets the cache.
				seq := last
				for n := 0; n < each; {
					tag := fmt.Sprintf(`"%s%d-%d"`, name, g, n)
					got, err := s.Append(ctx, "r", seq, note(tag), note(tag))
					if errors.Is(err, store.ErrConflict) {
						var ce *store.ConflictError
						if !errors.As(err, &ce) || ce.Actual <= seq {
							t.Errorf("conflict %v does not say where the journal ends", err)
							return
						}
						mu.Lock()
						conflicts++
						mu.Unlock()
						info, err := s.Get(ctx, "r")
						if err != nil {
							t.Error(err)
							return
						}
						seq = info.LastSeq
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					if got != seq+2 {
						t.Errorf("appended two records after %d and was told the journal ends at %d", seq, got)
						return
					}
					mu.Lock()
					for _, q := range []int64{got - 1, got} {
						if prev, dup := winners[q]; dup {
							t.Errorf("seq %d won by %s and by %s", q, prev, tag)
						}
						winners[q] = tag
					}
					mu.Unlock()
					seq = got
					n++
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	recs := checkIntact(t, b, "r", last+2*2*goroutines*each)
	for _, r := range recs[1:] {
		if winners[r.Seq] != string(r.Data) {
			t.Fatalf("record %d holds %s, its winner appended %s", r.Seq, r.Data, winners[r.Seq])
		}
	}
	t.Logf("%d appends, %d lost races", 2*goroutines*each, conflicts)
}
