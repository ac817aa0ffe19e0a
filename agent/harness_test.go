package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/tool"
)

// The crash harness's run: two tool rounds, each with a read-only call
// and a destructive one (which appends a line to a counter file), then a
// final answer. The model answers by the state of the history, not by
// call count, so a resumed run in a new process gets the same answers.

const harnessRunID = "run_crash"

func harnessModel(gate string) model.Model {
	return model.Funcs{GenerateFunc: func(ctx context.Context, req llm.Request) (llm.Response, error) {
		if gate != "" {
			if err := waitForFile(ctx, gate); err != nil {
				return llm.Response{}, err
			}
		}
		rounds := 0
		for _, m := range req.Messages {
			if len(m.ToolCalls()) > 0 {
				rounds++
			}
		}
		resp := llm.Response{FinishReason: llm.FinishToolCalls, Usage: llm.Usage{InputTokens: 10, OutputTokens: 3}}
		switch rounds {
		case 0:
			resp.Message = llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{call("c1", "read", "a"), call("c2", "write", "x")}}
		case 1:
			resp.Message = llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{call("c3", "write", "y"), call("c4", "read", "b")}}
		default:
			resp.Message, resp.FinishReason = llm.AssistantText("done"), llm.FinishStop
		}
		return resp, nil
	}}
}

func waitForFile(ctx context.Context, path string) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// harnessTools: read is read-only; write appends its idempotency key to
// the counter file, so the file says how often each call took effect.
// hangIn, when set, makes the call with that text hang after its effect
// (and say so on stdout), for a kill in the middle of a tool.
func harnessTools(counter, hangIn string) *tool.Set {
	var mu sync.Mutex
	read := tool.Func("read", "Reads.", func(_ context.Context, in echoArgs) (string, error) {
		return "read:" + in.Text, nil
	}, &tool.FuncOptions[echoArgs]{Effect: llm.EffectReadOnly})
	write := tool.Func("write", "Writes.", func(ctx context.Context, in echoArgs) (string, error) {
		mu.Lock()
		f, err := os.OpenFile(counter, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err == nil {
			_, err = fmt.Fprintln(f, agent.IdempotencyKey(ctx))
			if err == nil {
				err = f.Sync()
			}
			f.Close()
		}
		mu.Unlock()
		if err != nil {
			return "", err
		}
		if hangIn != "" && in.Text == hangIn {
			fmt.Println("IN_TOOL")
			os.Stdout.Sync()
			select {}
		}
		return "wrote:" + in.Text, nil
	}, nil)
	s, err := tool.NewSet(read, write)
	if err != nil {
		panic(err) // a bug in the test
	}
	return s
}

func harnessAgent(st store.Store, m model.Model, counter, hangIn, owner string, ttl time.Duration) *agent.Agent {
	return agent.New(agent.Config{
		Model:    m,
		System:   "crash harness",
		Tools:    harnessTools(counter, hangIn),
		Store:    st,
		Owner:    owner,
		ClaimTTL: ttl,
		NewID:    func() string { return harnessRunID },
	})
}

// effects reads the counter file: how often each call took effect.
func effects(t testing.TB, counter string) map[string]int {
	b, err := os.ReadFile(counter)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]int{}
	}
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, line := range strings.Fields(string(b)) {
		n[line]++
	}
	return n
}

// checkTranscript compares a resumed run's messages with the run that was
// never interrupted: equal, except that a destructive call interrupted
// mid-flight is answered with agent.InterruptedMaybe.
func checkTranscript(t testing.TB, got, want []llm.Message) (interrupted []string) {
	t.Helper()
	if err := llm.CheckHistory(got); err != nil {
		t.Fatalf("invalid transcript: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d:\n%s", len(got), len(want), dump(got))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Role != w.Role || len(g.Parts) != len(w.Parts) {
			t.Fatalf("message %d = %+v, want %+v", i, g, w)
		}
		for j := range g.Parts {
			gr, gok := g.Parts[j].(llm.ToolResult)
			if gok && gr.Content == agent.InterruptedMaybe {
				wr := w.Parts[j].(llm.ToolResult)
				if wr.Name != "write" || wr.CallID != gr.CallID {
					t.Fatalf("message %d part %d: %q interrupted, but only destructive calls may be", i, j, wr.Name)
				}
				interrupted = append(interrupted, gr.CallID)
				continue
			}
			if fmt.Sprint(g.Parts[j]) != fmt.Sprint(w.Parts[j]) {
				t.Fatalf("message %d part %d = %+v, want %+v", i, j, g.Parts[j], w.Parts[j])
			}
		}
	}
	return interrupted
}

func dump(msgs []llm.Message) string {
	var b strings.Builder
	for i, m := range msgs {
		fmt.Fprintf(&b, "%d %s: %v\n", i, m.Role, m.Parts)
	}
	return b.String()
}

// checkEffects: no destructive call took effect twice, and each took
// effect once unless the transcript says it was interrupted (then at most
// once).
func checkEffects(t testing.TB, counter string, interrupted []string) {
	t.Helper()
	for key, n := range effects(t, counter) {
		if n > 1 {
			t.Fatalf("call %s took effect %d times", key, n)
		}
	}
	for _, id := range []string{"c2", "c3"} {
		key := fmt.Sprintf("%s/%d/%s", harnessRunID, map[string]int{"c2": 1, "c3": 2}[id], id)
		n := effects(t, counter)[key]
		wasInterrupted := false
		for _, i := range interrupted {
			wasInterrupted = wasInterrupted || i == id
		}
		if !wasInterrupted && n != 1 {
			t.Fatalf("call %s took effect %d times, want 1", id, n)
		}
	}
}

// countingStore counts successful appends. Appends beyond failAfter
// (when positive) fail with errDiskFull and write nothing, as a full disk
// would; onAppend is called after each successful append.
type countingStore struct {
	store.Store
	mu        sync.Mutex
	n         int
	failAfter int
	onAppend  func(n int)
}

var errDiskFull = errors.New("write journal: no space left on device")

func (s *countingStore) Append(ctx context.Context, runID string, seq int64, recs ...store.Record) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAfter > 0 && s.n >= s.failAfter {
		return 0, errDiskFull
	}
	last, err := s.Store.Append(ctx, runID, seq, recs...)
	if err == nil {
		s.n++
		if s.onAppend != nil {
			s.onAppend(s.n)
		}
	}
	return last, err
}

func (s *countingStore) appends() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func writeFile(t testing.TB, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("go"), 0o600); err != nil {
		t.Fatal(err)
	}
}
