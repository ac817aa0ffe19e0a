package agent_test

import (
	"context"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model/openai"
	"github.com/loomkit/loom/tool"
)

// 10,000 runs at once in one process against loomtest: each makes a
// model call, then waits in a tool until all are waiting (the memory of
// an idle run is measured there), then finishes. No goroutine outlives
// them. Skipped with -short and under the race detector (which allows at
// most 8128 goroutines).
func TestTenThousandConcurrentRuns(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("10,000 concurrent runs: skipped with -short and under -race")
	}
	const n = 10_000
	srv := loomtest.Start(loomtest.Config{NoRecord: true, Lenient: true, Func: func(r *loomtest.Request) loomtest.Turn {
		if len(r.Decoded.Messages) == 1 {
			return loomtest.ToolCalls(loomtest.Call("call_1", "wait", `{}`))
		}
		return loomtest.Text("done")
	}})
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 256, MaxIdleConnsPerHost: 256}}
	base := runtime.NumGoroutine()

	var waiting sync.WaitGroup
	waiting.Add(n)
	release := make(chan struct{})
	wait := tool.Func("wait", "Waits.", func(ctx context.Context, _ struct{}) (string, error) {
		waiting.Done()
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, &tool.FuncOptions[struct{}]{Effect: llm.EffectReadOnly})
	m := openai.New(openai.Config{BaseURL: srv.OpenAIURL(), APIKey: "k", Model: "m", HTTPClient: client})
	a := agent.New(agent.Config{Model: m, Tools: set(t, wait)})

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var done sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		done.Go(func() {
			res, err := a.Run(ctx, agent.Prompt("go"))
			if err == nil && res.Output != "done" {
				err = context.DeadlineExceeded
			}
			if err != nil {
				errs <- err
			}
		})
	}
	waiting.Wait()
	var during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&during)
	perRun := (int64(during.HeapInuse) - int64(before.HeapInuse)) / n
	t.Logf("%d runs waiting in a tool: %d goroutines, heap in use %.1f MiB, %d bytes per idle run",
		n, runtime.NumGoroutine(), float64(during.HeapInuse)/(1<<20), perRun)
	close(release)
	done.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	client.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base+5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base+5 {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines left, %d before: a leak\n%s", g, base, buf[:runtime.Stack(buf, true)])
	}
}
