package modeltest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
)

// heapPeak runs f and returns the most heap in use while it ran, above
// what was in use before it (after a collection), sampled every
// millisecond.
func heapPeak(f func()) uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	peak := base
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	f()
	close(stop)
	wg.Wait()
	runtime.ReadMemStats(&ms)
	peak = max(peak, ms.HeapInuse)
	if peak < base {
		return 0
	}
	return peak - base
}

// call makes one call in mode and returns the fold and the error.
func call(m model.Model, mode string) (llm.Response, error) {
	if mode == "blocking" {
		return m.Generate(context.Background(), baseRequest)
	}
	r, _, err := StreamCall(context.Background(), m, baseRequest)
	return r, err
}

// tooLarge checks that err is a KindAnswerTooLarge error that is not
// retried and that names the bound in words.
func tooLarge(t *testing.T, err error, words string) {
	t.Helper()
	if model.KindOf(err) != model.KindAnswerTooLarge {
		t.Fatalf("err = %v, want kind %s", err, model.KindAnswerTooLarge)
	}
	if model.IsRetryable(err) {
		t.Errorf("an answer too large is retried: %v", err)
	}
	if !strings.Contains(err.Error(), words) {
		t.Errorf("the error does not say %q: %v", words, err)
	}
	var e *model.Error
	if errors.As(err, &e) && (e.RequestID == "" || e.Op == "") {
		t.Errorf("the error lacks the request id or the operation: %+v", e)
	}
}

func calls(n int, args string) loomtest.Turn {
	cs := make([]llm.ToolCall, n)
	for i := range cs {
		cs[i] = loomtest.Call(fmt.Sprintf("call_%d", i), "read_file", args)
	}
	return loomtest.ToolCalls(cs...)
}

func (s Suite) testBounds(t *testing.T) {
	modes := []string{"blocking", "stream"}

	// A model that never stops: 64 KiB text deltas without end. The
	// stream ends at the default bound on content with a clear error,
	// having held no more than a few times that bound (the blocking body
	// at the bound on bodies).
	t.Run("endless answer", func(t *testing.T) {
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				flood := loomtest.Turn{Parts: []llm.Part{llm.Text{Text: "Start."}}, Flood: strings.Repeat("All work and no play. ", 64<<10/22), FloodBytes: 80 << 20}
				m, srv := s.start(t, loomtest.Config{Repeat: true, Turns: []loomtest.Turn{flood}}, Setup{})
				var err error
				var resp llm.Response
				peak := heapPeak(func() { resp, err = call(m, mode) })
				words := "more than 16777216 bytes of content"
				if mode == "blocking" {
					words = "exceeds"
				}
				tooLarge(t, err, words)
				if n := len(resp.Text()); n > 16<<20 {
					t.Errorf("%d bytes of text reached the caller, more than the bound", n)
				}
				t.Logf("peak heap above the start: %d MiB", peak>>20)
				if peak > 512<<20 {
					t.Errorf("the refused answer took %d MiB of heap at its peak, want at most 512", peak>>20)
				}
				if n := len(srv.Requests()); n != 1 {
					t.Errorf("%d requests", n)
				}
			})
		}
	})

	// More tool calls than the default bound (4096) in one answer:
	// refused, blocking or streamed, before any of them is built.
	t.Run("5000 calls", func(t *testing.T) {
		turn := calls(5000, `{"path":"a.go"}`)
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				m, _ := s.start(t, loomtest.Config{Repeat: true, Turns: []loomtest.Turn{turn}}, Setup{})
				resp, err := call(m, mode)
				tooLarge(t, err, "tool calls")
				if n := len(resp.ToolCalls()); n > 4096 {
					t.Errorf("%d calls reached the caller", n)
				}
			})
		}
	})

	// A call whose arguments are larger than the default bound on
	// content (16 MiB): 20 MiB of them, in a whole blocking answer or a
	// stream of 64 KiB pieces.
	t.Run("20 MiB of arguments", func(t *testing.T) {
		turn := loomtest.Turn{Flood: strings.Repeat("0123456789abcdef", 4<<10), FloodBytes: 20 << 20, FloodCall: "write_file"}
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				m, _ := s.start(t, loomtest.Config{Repeat: true, Turns: []loomtest.Turn{turn}}, Setup{})
				var err error
				var resp llm.Response
				peak := heapPeak(func() { resp, err = call(m, mode) })
				tooLarge(t, err, "more than 16777216 bytes of content")
				for _, c := range resp.ToolCalls() {
					if !c.Incomplete {
						t.Errorf("call %s of a refused answer is not Incomplete", c.ID)
					}
				}
				t.Logf("peak heap above the start: %d MiB", peak>>20)
				if peak > 512<<20 {
					t.Errorf("the refused answer took %d MiB of heap at its peak, want at most 512", peak>>20)
				}
			})
		}
	})

	// Each bound holds exactly: an answer at it passes, one past it fails.
	long := strings.Repeat("ü", 1000) // 2,000 bytes
	for _, c := range []struct {
		name     string
		setup    Setup
		at, past loomtest.Turn
		words    string
	}{
		{name: "calls", setup: Setup{MaxToolCalls: 8}, at: calls(8, `{}`), past: calls(9, `{}`), words: "more than 8 tool calls"},
		{name: "text bytes", setup: Setup{MaxAnswerBytes: 4000}, at: loomtest.Text(long + long), past: loomtest.Text(long + long + "x"), words: "more than 4000 bytes"},
		{name: "thinking bytes", setup: Setup{MaxAnswerBytes: 4000},
			at:    loomtest.Turn{Parts: []llm.Part{llm.Thinking{Text: long}, llm.Text{Text: long[:1000]}}},
			past:  loomtest.Turn{Parts: []llm.Part{llm.Thinking{Text: long + long}, llm.Text{Text: "x"}}},
			words: "more than 4000 bytes"},
		{name: "argument bytes", setup: Setup{MaxAnswerBytes: 4000},
			at:    calls(1, `{"a":"`+strings.Repeat("x", 3000)+`"}`),
			past:  calls(1, `{"a":"`+strings.Repeat("x", 4000)+`"}`),
			words: "more than 4000 bytes"},
		{name: "parts", setup: Setup{MaxParts: 4},
			at:    loomtest.Turn{Parts: []llm.Part{llm.Text{Text: "Reading."}, loomtest.Call("c1", "read_file", `{}`), loomtest.Call("c2", "grep", `{}`), loomtest.Call("c3", "list_dir", `{}`)}},
			past:  loomtest.Turn{Parts: []llm.Part{llm.Text{Text: "Reading."}, loomtest.Call("c1", "read_file", `{}`), loomtest.Call("c2", "grep", `{}`), loomtest.Call("c3", "list_dir", `{}`), loomtest.Call("c4", "read_file", `{}`)}},
			words: "more than 4 parts"},
	} {
		for _, mode := range modes {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				for i, tt := range []loomtest.Turn{c.at, c.past} {
					tt.Chunk = 100
					m, _ := s.start(t, loomtest.Config{Turns: []loomtest.Turn{tt}}, c.setup)
					resp, err := call(m, mode)
					if i == 0 {
						if err != nil {
							t.Fatalf("an answer at the bound failed: %v", err)
						}
						s.checkMatchesTurn(t, tt, resp)
						continue
					}
					tooLarge(t, err, c.words)
					for _, p := range resp.ToolCalls() {
						if !p.Incomplete {
							t.Errorf("call %s of a refused stream is not Incomplete", p.ID)
						}
					}
				}
			})
		}
	}

	// The total deadline ends an answer that trickles forever, which the
	// idle timeout cannot (every event resets it).
	t.Run("trickle past the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			turn := loomtest.Turn{Parts: []llm.Part{llm.Text{Text: "Start."}}, Flood: "tick ", EventDelay: 10 * time.Second}
			m, _ := s.startPipe(t, loomtest.Config{Turns: []loomtest.Turn{turn}}, Setup{Timeout: 3 * time.Minute})
			start := time.Now()
			_, _, err := StreamCall(context.Background(), m, baseRequest)
			if model.KindOf(err) != model.KindTimeout {
				t.Fatalf("err = %v, want a timeout", err)
			}
			if d := time.Since(start); d != 3*time.Minute {
				t.Errorf("gave up after %v, want at the 3 min deadline", d)
			}
		})
	})
}
