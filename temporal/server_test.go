package temporal

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// The tests in server_*_test.go run against a real Temporal server whose
// address is in LOOM_TEMPORAL_ADDR; scripts/test starts a dev server on a
// free port and sets it. Without it they skip, unless CI=true, where they
// fail.

// serverClient returns a client of the test server, closed when t ends.
func serverClient(t *testing.T) client.Client {
	t.Helper()
	addr := os.Getenv("LOOM_TEMPORAL_ADDR")
	if addr == "" {
		msg := "LOOM_TEMPORAL_ADDR is not set: run scripts/test, which starts a Temporal dev server (.cache/bin/temporal server start-dev) and sets it, or start one and set LOOM_TEMPORAL_ADDR=127.0.0.1:PORT"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// Server tests wait on the server more than they work: they run in
	// parallel with each other (each has task queues of its own).
	t.Parallel()
	c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger{}})
	if err != nil {
		t.Fatalf("connecting to the Temporal server at %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// queueName returns a task queue of this test alone.
func queueName(t testing.TB) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return "loom-test-" + name + "-" + rand.Text()[:8]
}

// workerOptions are the options of test workers: a short sticky timeout,
// so that a task of a killed worker goes to another quickly.
func workerOptions() worker.Options {
	return worker.Options{
		StickyScheduleToStartTimeout: time.Second,
		DeadlockDetectionTimeout:     time.Minute, // the race detector is slow
	}
}

// startWorker runs a worker of reg on queue until t ends.
func startWorker(t testing.TB, c client.Client, queue string, reg Registry) {
	t.Helper()
	w, err := NewWorker(c, reg, &WorkerOptions{TaskQueue: queue, Worker: workerOptions()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

// fastOptions are Options for tests: short heartbeats and retries.
func fastOptions() Options {
	return Options{
		ModelHeartbeat: 2 * time.Second,
		ToolHeartbeat:  2 * time.Second,
		ModelRetry:     &retryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: time.Second, MaximumAttempts: 5},
		ToolRetry:      &retryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: time.Second, MaximumAttempts: 5},
	}
}

func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
