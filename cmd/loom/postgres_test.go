package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/loomkit/loom/loomtest"
)

// postgresURL is the PostgreSQL server scripts/test starts; without it the
// tests skip, except under CI=true, where they fail.
func postgresURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("LOOM_POSTGRES_URL")
	if u == "" {
		msg := "LOOM_POSTGRES_URL is not set: run scripts/test, which starts a throwaway PostgreSQL cluster, or start one: scripts/install-postgres && export LOOM_POSTGRES_URL=$(scripts/install-postgres start .cache/postgres)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return u
}

// newDatabase creates a database of the test's own on the test server and
// returns its URL; it is dropped when the test ends.
func newDatabase(t *testing.T) string {
	t.Helper()
	base := postgresURL(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connecting to the test server: %v", err)
	}
	defer c.Close(ctx)
	name := "loomcli_" + strings.ToLower(rand.Text()[:12])
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("dropping database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// queryInt runs a query returning one number in the database at dbURL.
func queryInt(t *testing.T, dbURL, sql string) int {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// elsewhere makes the harness another machine: its own home and state
// directories (and so its own default SQLite store), the same workspace
// and model server.
func (h *harness) elsewhere() *harness {
	h.t.Helper()
	other := *h
	other.env = map[string]string{}
	for k, v := range h.env {
		other.env[k] = v
	}
	root := h.t.TempDir()
	other.home = filepath.Join(root, "home")
	other.store = filepath.Join(root, "state", "runs.db")
	if err := os.MkdirAll(other.home, 0o755); err != nil {
		h.t.Fatal(err)
	}
	other.env["HOME"] = other.home
	other.env["XDG_STATE_HOME"] = filepath.Join(root, "xdg-state")
	return &other
}

// A run checkpointed to PostgreSQL is listed and resumed from another
// machine, and its conversation goes on there; the machine's own SQLite
// store, the default, knows nothing of it.
func TestPostgresStore(t *testing.T) {
	db := newDatabase(t)
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		bash("c1", "touch started && sleep 37"),
		loomtest.Text("resumed and finished"),
		loomtest.Text("the second answer"),
	}})
	r := h.start("run", "--store", db, "--yes", "--output", "jsonl", "wait a while")
	id := startedRunID(t, r)
	waitFile(t, filepath.Join(h.ws, "started"))
	r.cmd.Process.Signal(syscall.SIGINT)
	r.wait(t).want(t, 130)
	if n := queryInt(t, db, "SELECT count(*) FROM loom.runs"); n != 1 {
		t.Fatalf("the database holds %d runs, want the one", n)
	}

	b := h.elsewhere()
	runs := func(h *harness, args ...string) map[string]map[string]any {
		t.Helper()
		out := map[string]map[string]any{}
		for _, l := range lines(t, h.run(append([]string{"runs", "--output", "jsonl"}, args...)...).want(t, 0).stdout) {
			out[fmt.Sprint(l["id"])] = l
		}
		return out
	}
	if row := runs(b, "--store", db)[id]; row["status"] != "interrupted" || row["prompt"] != "wait a while" {
		t.Fatalf("loom runs --store postgres://... on another machine: %v, want the interrupted run", row)
	}
	if rows := runs(h); len(rows) != 0 {
		t.Fatalf("the default SQLite store lists %v, want nothing", rows)
	}
	res := b.run("resume", "--store", db, id).want(t, 0)
	if res.stdout != "resumed and finished\n" {
		t.Fatalf("resume on another machine: %q\n%s", res.stdout, res)
	}
	res = h.run("resume", "--store", db, id, "and now?").want(t, 0)
	if res.stdout != "the second answer\n" {
		t.Fatalf("resume with a new prompt: %q\n%s", res.stdout, res)
	}
	// The new prompt's request carries the conversation so far.
	if got := h.requestText(2); !strings.Contains(got, "wait a while") || !strings.Contains(got, "resumed and finished") || !strings.Contains(got, "and now?") {
		t.Errorf("the conversation did not carry over:\n%s", got)
	}
	if row := runs(b, "--store", db)[id]; row["status"] != "done" {
		t.Errorf("after resuming: %v", row)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM loom.runs"); n != 2 {
		t.Errorf("the database holds %d runs, want 2 (the run and its follow-up)", n)
	}
}

// A database that cannot be reached is a usage error that names it with
// its credentials masked, promptly and without a stack trace.
func TestPostgresStoreUnreachable(t *testing.T) {
	h := newHarness(t, loomtest.Config{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	bad := "postgres://loom:s3cret@" + addr + "/loom?sslmode=disable"
	for _, args := range [][]string{
		{"run", "--store", bad, "hello"},
		{"runs", "--store", bad},
		{"resume", "--store", bad, "run_x"},
	} {
		r := h.run(args...).want(t, 2).noStackTrace(t)
		if !strings.Contains(r.stderr, "cannot open the run store postgres://[redacted]@"+addr) || strings.Contains(r.stderr, "s3cret") {
			t.Errorf("loom %s: stderr %q, want the URL with its password masked", args[0], r.stderr)
		}
	}
	if len(h.srv.Requests()) != 0 {
		t.Error("the model was called although the store could not be opened")
	}
}

// loom worker --blobs postgres://... keeps run transcripts in the database,
// where every worker of the queue finds them.
func TestWorkerBlobsInPostgres(t *testing.T) {
	addr := temporalAddr(t)
	db := newDatabase(t)
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		call("c1", "read_file", `{"path":"a.txt"}`),
		loomtest.Text("Read it."),
	}})
	h.writeFile("a.txt", "alpha\n")
	queue := "loom-cli-test-" + strings.ToLower(rand.Text()[:10])
	w := h.start("worker", "--temporal", addr, "--queue", queue, "--blobs", db)
	w.waitFor(t, "the worker to start", func(_, stderr string) bool { return strings.Contains(stderr, "loom worker: task queue") })
	if _, stderr := w.output(); !strings.Contains(stderr, "blobs in postgres://") {
		t.Errorf("the worker does not say where its blobs are:\n%s", stderr)
	}
	r := h.run("run", "--temporal", addr, "--queue", queue, "--yes", "read it").want(t, 0)
	if r.stdout != "Read it.\n" {
		t.Fatalf("stdout %q\n%s", r.stdout, r)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM loom.blobs"); n == 0 {
		t.Fatal("the run left no blobs in the database")
	}
}

// A worker whose blobs stay on this machine refuses to join a task queue
// that workers of other machines poll, and says how to fix it; with a
// shared store it starts, and warns about the worker that keeps its blobs
// to itself.
func TestWorkerRefusesUnsharedBlobs(t *testing.T) {
	addr := temporalAddr(t)
	h := newHarness(t, loomtest.Config{})
	queue := "loom-cli-test-" + strings.ToLower(rand.Text()[:10])
	pollAs(t, addr, queue, "4242@another-machine@"+queue+" loom-blobs=local")

	r := h.run("worker", "--temporal", addr, "--queue", queue).want(t, 2).noStackTrace(t)
	for _, want := range []string{"another-machine", "--blobs postgres://", "--blobs DIR"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, r.stderr)
		}
	}
	for _, blobs := range []string{newDatabase(t), t.TempDir()} {
		w := h.start("worker", "--temporal", addr, "--queue", queue, "--blobs", blobs)
		w.waitFor(t, "the worker to start", func(_, stderr string) bool { return strings.Contains(stderr, "loom worker: task queue") })
		if _, stderr := w.output(); !strings.Contains(stderr, "WARNING") || !strings.Contains(stderr, "another-machine") {
			t.Errorf("a worker with --blobs %s does not warn about the worker that keeps its blobs:\n%s", blobs, stderr)
		}
		w.cmd.Process.Signal(syscall.SIGINT)
		w.wait(t)
	}
}

// pollAs makes the Temporal server see a worker of identity polling queue
// (for workflow and activity tasks) until the test ends.
func pollAs(t *testing.T, addr, queue, identity string) {
	t.Helper()
	stop := startPoller(t, addr, queue, identity)
	t.Cleanup(stop)
	deadline := time.Now().Add(30 * time.Second)
	for !pollerSeen(t, addr, queue, identity) {
		if time.Now().After(deadline) {
			t.Fatal("the server does not list the test's poller after 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startPoller runs an SDK worker of identity on queue, with a workflow and
// an activity nobody starts, and returns how to stop it.
func startPoller(t *testing.T, addr, queue, identity string) (stop func()) {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: addr, Identity: identity, Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatalf("connecting to the Temporal server at %s: %v", addr, err)
	}
	w := worker.New(c, queue, worker.Options{Identity: identity})
	w.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil }, workflow.RegisterOptions{Name: "loom-test-idle"})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "loom-test-idle"})
	if err := w.Start(); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return func() {
		w.Stop()
		c.Close()
	}
}

// pollerSeen reports whether the server lists a poller of identity on
// queue, for workflow and for activity tasks.
func pollerSeen(t *testing.T, addr, queue, identity string) bool {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: addr, Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tq := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		resp, err := c.DescribeTaskQueue(context.Background(), queue, tq)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(resp.GetPollers(), func(p *taskqueuepb.PollerInfo) bool { return p.GetIdentity() == identity }) {
			return false
		}
	}
	return true
}
