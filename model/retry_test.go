package model_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

// flaky is a Model whose calls fail with errs in turn and then succeed; it
// records when each attempt started and the attempt number it saw.
type flaky struct {
	mu       sync.Mutex
	errs     []error
	times    []time.Time
	attempts []int
}

func (f *flaky) next(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.times = append(f.times, time.Now())
	f.attempts = append(f.attempts, model.RetryAttempt(ctx))
	if len(f.errs) == 0 {
		return nil
	}
	err := f.errs[0]
	if len(f.errs) > 1 {
		f.errs = f.errs[1:]
	} else if err != nil && strings.HasPrefix(err.Error(), "forever") {
		return err
	} else {
		f.errs = nil
	}
	return err
}

func (f *flaky) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := f.next(ctx); err != nil {
		return llm.Response{}, err
	}
	return llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop}, nil
}

func (f *flaky) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	return model.Funcs{GenerateFunc: f.Generate}.Stream(ctx, req)
}

func (f *flaky) gaps() []time.Duration {
	var g []time.Duration
	for i := 1; i < len(f.times); i++ {
		g = append(g, f.times[i].Sub(f.times[i-1]))
	}
	return g
}

func kindErr(k model.Kind) error { return &model.Error{Kind: k, Op: "test"} }

// foreverErr makes flaky fail with the same error on every attempt.
type foreverErr struct{ e *model.Error }

func (e foreverErr) Error() string { return "forever: " + e.e.Error() }
func (e foreverErr) Unwrap() error { return e.e }

func TestRetryBackoffSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{errs: []error{kindErr(model.KindServer), kindErr(model.KindNetwork), kindErr(model.KindOverloaded)}}
		m := model.Retry(model.RetryPolicy{})(f)
		resp, err := m.Generate(context.Background(), llm.Request{})
		if err != nil || resp.Text() != "ok" {
			t.Fatalf("got %v %v", resp, err)
		}
		gaps := f.gaps()
		want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}
		if len(gaps) != len(want) {
			t.Fatalf("gaps %v, want %d", gaps, len(want))
		}
		for i, g := range gaps {
			if g > want[i] || g < want[i]*3/4 {
				t.Errorf("wait %d: %v, want in [%v, %v]", i+1, g, want[i]*3/4, want[i])
			}
		}
		if got := f.attempts; len(got) != 4 || got[0] != 0 || got[3] != 3 {
			t.Errorf("attempt numbers seen by the model: %v", got)
		}
	})
}

func TestRetryBackoffCap(t *testing.T) {
	p := model.RetryPolicy{}
	for n := 1; n <= 10; n++ {
		d := p.Backoff(n)
		base := min(500*time.Millisecond<<(n-1), 8*time.Second)
		if d > base || d < base*3/4 {
			t.Fatalf("Backoff(%d) = %v, want in [%v, %v]", n, d, base*3/4, base)
		}
	}
	if d := p.Backoff(1000); d > 8*time.Second {
		t.Fatalf("Backoff(1000) = %v", d)
	}
}

func TestRetryAfterHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{errs: []error{&model.Error{Kind: model.KindRateLimited, Status: 429, RetryAfter: 2 * time.Second}}}
		_, err := model.Retry(model.RetryPolicy{})(f).Generate(context.Background(), llm.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if g := f.gaps(); len(g) != 1 || g[0] != 2*time.Second {
			t.Fatalf("gaps %v, want [2s]", g)
		}
	})
}

func TestRetryAfterOverCapFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := &flaky{errs: []error{&model.Error{Kind: model.KindRateLimited, Status: 429, RetryAfter: time.Hour}}}
		_, err := model.Retry(model.RetryPolicy{})(f).Generate(context.Background(), llm.Request{})
		var e *model.Error
		if !errors.As(err, &e) || e.Kind != model.KindRateLimited || e.RetryAfter != time.Hour {
			t.Fatalf("got %v", err)
		}
		if !strings.Contains(err.Error(), "1h0m0s") || len(f.times) != 1 || time.Since(start) != 0 {
			t.Fatalf("err %q, %d attempts, %v elapsed", err, len(f.times), time.Since(start))
		}
	})
}

func TestRetryNeverRetries(t *testing.T) {
	for _, k := range []model.Kind{model.KindBadRequest, model.KindAuth, model.KindPermission, model.KindNotFound,
		model.KindRequestTooLarge, model.KindQuota, model.KindContextTooLong, model.KindInvalidResponse} {
		f := &flaky{errs: []error{kindErr(k)}}
		_, err := model.Retry(model.RetryPolicy{})(f).Generate(context.Background(), llm.Request{})
		if model.KindOf(err) != k || len(f.times) != 1 {
			t.Errorf("%s: %d attempts, err %v", k, len(f.times), err)
		}
	}
	// Not an *Error at all (a cancellation): not retried either.
	f := &flaky{errs: []error{context.Canceled}}
	if _, err := model.Retry(model.RetryPolicy{})(f).Generate(context.Background(), llm.Request{}); !errors.Is(err, context.Canceled) || len(f.times) != 1 {
		t.Errorf("cancel: %d attempts, %v", len(f.times), err)
	}
}

func TestRetryProviderVerdictWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		no, yes := false, true
		f := &flaky{errs: []error{&model.Error{Kind: model.KindServer, Status: 500, ShouldRetry: &no}}}
		if _, err := model.Retry(model.RetryPolicy{})(f).Generate(context.Background(), llm.Request{}); err == nil || len(f.times) != 1 {
			t.Errorf("500 with x-should-retry false: %d attempts, %v", len(f.times), err)
		}
		f = &flaky{errs: []error{&model.Error{Kind: model.KindBadRequest, Status: 400, ShouldRetry: &yes}}}
		if _, err := model.Retry(model.RetryPolicy{})(f).Generate(context.Background(), llm.Request{}); err != nil || len(f.times) != 2 {
			t.Errorf("400 with x-should-retry true: %d attempts, %v", len(f.times), err)
		}
	})
}

func TestRetryPolicyOverride(t *testing.T) {
	f := &flaky{errs: []error{kindErr(model.KindServer)}}
	p := model.RetryPolicy{ShouldRetry: func(error) bool { return false }}
	if _, err := model.Retry(p)(f).Generate(context.Background(), llm.Request{}); err == nil || len(f.times) != 1 {
		t.Fatalf("%d attempts, %v", len(f.times), err)
	}
	f = &flaky{errs: []error{kindErr(model.KindServer)}}
	if _, err := model.Retry(model.RetryPolicy{MaxRetries: -1})(f).Generate(context.Background(), llm.Request{}); err == nil || len(f.times) != 1 {
		t.Fatalf("MaxRetries -1: %d attempts, %v", len(f.times), err)
	}
}

func TestRetryGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{errs: []error{foreverErr{&model.Error{Kind: model.KindOverloaded, Status: 529}}}}
		_, err := model.Retry(model.RetryPolicy{})(f).Generate(context.Background(), llm.Request{})
		if model.KindOf(err) != model.KindOverloaded || len(f.times) != 4 || !strings.Contains(err.Error(), "gave up after 4 attempts") {
			t.Fatalf("%d attempts, %v", len(f.times), err)
		}
	})
}

func TestRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := &flaky{errs: []error{foreverErr{&model.Error{Kind: model.KindRateLimited, RetryAfter: 2 * time.Second}}}}
		p := model.RetryPolicy{MaxRetries: 10, Budget: 5 * time.Second}
		_, err := model.Retry(p)(f).Generate(context.Background(), llm.Request{})
		// Attempts at 0, 2 and 4 s; a fourth at 6 s would pass the budget.
		if len(f.times) != 3 || time.Since(start) != 4*time.Second || !strings.Contains(err.Error(), "retry budget") {
			t.Fatalf("%d attempts over %v: %v", len(f.times), time.Since(start), err)
		}
		if model.KindOf(err) != model.KindRateLimited {
			t.Fatalf("kind lost: %v", err)
		}
	})
}

func TestRetryCancelDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		f := &flaky{errs: []error{&model.Error{Kind: model.KindRateLimited, RetryAfter: 30 * time.Second}}}
		start := time.Now()
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := model.Retry(model.RetryPolicy{})(f).Generate(ctx, llm.Request{})
		if !errors.Is(err, context.Canceled) || model.IsRetryable(err) {
			t.Fatalf("got %v", err)
		}
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Fatalf("returned after %v, want 100ms", got)
		}
		time.Sleep(time.Minute)
		if len(f.times) != 1 {
			t.Fatalf("%d attempts after the cancel", len(f.times))
		}
	})
}

func TestRetryObservers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fromCtx, fromPolicy, fromOuter []model.RetryInfo
		ctx := model.WithRetryObserver(context.Background(), func(i model.RetryInfo) { fromOuter = append(fromOuter, i) })
		ctx = model.WithRetryObserver(ctx, func(i model.RetryInfo) { fromCtx = append(fromCtx, i) })
		var logs bytes.Buffer
		p := model.RetryPolicy{
			OnRetry: func(i model.RetryInfo) { fromPolicy = append(fromPolicy, i) },
			Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		}
		secret := &model.Error{Kind: model.KindServer, Message: "upstream rejected key sk-proj-abcdefghijklmnop", RetryAfter: time.Second}
		f := &flaky{errs: []error{secret, kindErr(model.KindNetwork)}}
		if _, err := model.Retry(p)(f).Generate(ctx, llm.Request{}); err != nil {
			t.Fatal(err)
		}
		for name, got := range map[string][]model.RetryInfo{"ctx": fromCtx, "outer ctx": fromOuter, "policy": fromPolicy} {
			if len(got) != 2 || got[0].Attempt != 1 || got[1].Attempt != 2 || got[0].Wait != time.Second || !errors.Is(got[0].Err, secret) {
				t.Errorf("%s observer saw %+v", name, got)
			}
		}
		if !strings.Contains(logs.String(), "attempt=1") || strings.Contains(logs.String(), "abcdefghijklmnop") {
			t.Errorf("log: %s", logs.String())
		}
	})
}

// eventsModel streams a script of attempts: each is a list of events and
// an optional final error.
type eventsModel struct {
	attempts [][]any
	calls    int
}

func (m *eventsModel) Generate(context.Context, llm.Request) (llm.Response, error) {
	panic("not used")
}

func (m *eventsModel) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	script := m.attempts[min(m.calls, len(m.attempts)-1)]
	m.calls++
	return func(yield func(llm.Event, error) bool) {
		for _, x := range script {
			switch x := x.(type) {
			case error:
				yield(nil, x)
				return
			case llm.Event:
				if !yield(x, nil) {
					return
				}
			}
		}
	}
}

func drain(seq iter.Seq2[llm.Event, error]) (llm.Response, []llm.Event, error) {
	var acc llm.Accumulator
	var evs []llm.Event
	for ev, err := range seq {
		if err != nil {
			return acc.Response(), evs, err
		}
		evs = append(evs, ev)
		acc.Add(ev)
	}
	return acc.Response(), evs, nil
}

func TestRetryStream(t *testing.T) {
	overloaded := &model.Error{Kind: model.KindOverloaded, Type: "overloaded_error"}
	good := []any{llm.ResponseStart{ID: "good"}, llm.TextDelta{Text: "hi"}, llm.Finish{Reason: llm.FinishStop}}
	run := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) { synctest.Test(t, f) })
	}
	{
		run("error before anything", func(t *testing.T) {
			m := &eventsModel{attempts: [][]any{{overloaded}, good}}
			resp, _, err := drain(model.Retry(model.RetryPolicy{})(m).Stream(context.Background(), llm.Request{}))
			if err != nil || resp.Text() != "hi" || m.calls != 2 {
				t.Fatalf("%d calls: %v %v", m.calls, resp, err)
			}
		})
		run("error after the start only", func(t *testing.T) {
			// message_start then event: error: nothing visible yet, so retried;
			// the failed attempt's identity never reaches the consumer.
			m := &eventsModel{attempts: [][]any{{llm.ResponseStart{ID: "bad"}, llm.UsageReport{Usage: llm.Usage{InputTokens: 9}}, overloaded}, good}}
			resp, evs, err := drain(model.Retry(model.RetryPolicy{})(m).Stream(context.Background(), llm.Request{}))
			if err != nil || m.calls != 2 || resp.ID != "good" || resp.Usage.InputTokens != 0 || len(evs) != 3 {
				t.Fatalf("%d calls, events %v: %+v %v", m.calls, evs, resp, err)
			}
		})
		run("error after text", func(t *testing.T) {
			m := &eventsModel{attempts: [][]any{{llm.TextDelta{Text: "a"}, llm.TextDelta{Text: "b"}, llm.TextDelta{Text: "c"}, overloaded}, good}}
			resp, _, err := drain(model.Retry(model.RetryPolicy{})(m).Stream(context.Background(), llm.Request{}))
			if model.KindOf(err) != model.KindOverloaded || m.calls != 1 || resp.Text() != "abc" || !resp.Truncated {
				t.Fatalf("%d calls: %+v %v", m.calls, resp, err)
			}
		})
		run("held events released at a clean end", func(t *testing.T) {
			m := &eventsModel{attempts: [][]any{{llm.ResponseStart{ID: "x"}, llm.UsageReport{Usage: llm.Usage{InputTokens: 3}}}}}
			_, evs, err := drain(model.Retry(model.RetryPolicy{})(m).Stream(context.Background(), llm.Request{}))
			if err != nil || len(evs) != 2 {
				t.Fatalf("events %v, %v", evs, err)
			}
		})
		run("single use", func(t *testing.T) {
			m := &eventsModel{attempts: [][]any{good}}
			seq := model.Retry(model.RetryPolicy{})(m).Stream(context.Background(), llm.Request{})
			drain(seq)
			_, evs, err := drain(seq)
			if err == nil || len(evs) != 0 || m.calls != 1 {
				t.Fatalf("second range: %v %v (%d calls)", evs, err, m.calls)
			}
		})
		run("consumer stops", func(t *testing.T) {
			m := &eventsModel{attempts: [][]any{good}}
			n := 0
			for range model.Retry(model.RetryPolicy{})(m).Stream(context.Background(), llm.Request{}) {
				n++
				break
			}
			if n != 1 {
				t.Fatal(n)
			}
		})
	}
}

// Under WithoutRetry the middleware makes one attempt and returns its
// failure as it is, blocking and streaming; without it the same model is
// retried (so the test can fail).
func TestWithoutRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		overloaded := &model.Error{Kind: model.KindOverloaded, Status: 529}
		f := &flaky{errs: []error{overloaded}}
		m := model.Retry(model.RetryPolicy{})(f)
		_, err := m.Generate(model.WithoutRetry(context.Background()), llm.Request{})
		if err != overloaded || len(f.times) != 1 {
			t.Fatalf("Generate: %d attempts, %v; want one attempt and the error itself", len(f.times), err)
		}
		s := &eventsModel{attempts: [][]any{{overloaded}, {llm.TextDelta{Text: "hi"}, llm.Finish{Reason: llm.FinishStop}}}}
		_, _, err = drain(model.Retry(model.RetryPolicy{})(s).Stream(model.WithoutRetry(context.Background()), llm.Request{}))
		if model.KindOf(err) != model.KindOverloaded || s.calls != 1 {
			t.Fatalf("Stream: %d calls, %v", s.calls, err)
		}
		f = &flaky{errs: []error{overloaded}}
		if _, err := model.Retry(model.RetryPolicy{})(f).Generate(context.Background(), llm.Request{}); err != nil || len(f.times) != 2 {
			t.Fatalf("with retries: %d attempts, %v", len(f.times), err)
		}
	})
}
