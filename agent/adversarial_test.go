package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/tool"
)

// ADVERSARIAL 37: five parallel calls, two succeed, one fails, one
// panics, one times out: exactly five results, in one message, in call
// order, with matching ids; the loop goes on.
func TestFiveParallelCallsFiveResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &probe{name: "p", effect: llm.EffectReadOnly}
		p.onCall = func(ctx context.Context, text string) (llm.ToolResult, error) {
			switch text {
			case "fail":
				return tool.ErrorResult("no such file"), nil
			case "panic":
				panic("index out of range")
			case "timeout":
				ctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				<-ctx.Done()
				return tool.ErrorResult("timed out after 1s"), nil
			}
			return tool.TextResult("ok " + text), nil
		}
		m := modeltest.NewScript(modeltest.ToolCalls(
			call("c1", "p", "a"), call("c2", "p", "fail"), call("c3", "p", "panic"), call("c4", "p", "timeout"), call("c5", "p", "b"),
		), modeltest.Text("carried on"))
		res, err := agent.New(agent.Config{Model: m, Tools: set(t, p)}).Run(context.Background(), agent.Prompt("go"))
		if err != nil {
			t.Fatal(err)
		}
		msg := res.Messages[2]
		rs := msg.ToolResults()
		if len(rs) != 5 || len(msg.Parts) != 5 {
			t.Fatalf("message holds %d parts, %d results", len(msg.Parts), len(rs))
		}
		wantErr := []bool{false, true, true, true, false}
		for i, r := range rs {
			if r.CallID != []string{"c1", "c2", "c3", "c4", "c5"}[i] || r.IsError != wantErr[i] {
				t.Fatalf("result %d = %+v", i, r)
			}
		}
		if !strings.Contains(rs[2].Content, "index out of range") || res.Output != "carried on" {
			t.Fatalf("panic result %q, output %q", rs[2].Content, res.Output)
		}
	})
}

// ADVERSARIAL 74: a decision delivered twice is applied once; the second
// delivery is refused because the run no longer waits for it.
func TestDecisionsDeliveredTwice(t *testing.T) {
	st := store.NewMemory()
	var ran []string
	tools := set(t, guardedTool(llm.EffectDestructive, &ran))
	m := modeltest.NewScript(modeltest.ToolCalls(pathCall("c1", "guarded_destructive", "x")), modeltest.Text("done"))
	a := agent.New(agent.Config{Model: m, Approver: suspender(), Tools: tools, Store: st})
	_, err := a.Run(context.Background(), agent.Prompt("go"))
	se := mustAs[*agent.SuspendedError](t, err)
	approve := agent.Resumption{RunID: se.RunID, Decisions: []run.Decision{{CallID: "c1", Action: run.Approved}}}
	if _, err := a.Resume(context.Background(), approve); err != nil {
		t.Fatal(err)
	}
	_, err = a.Resume(context.Background(), approve)
	if !errors.Is(err, agent.ErrResume) || !strings.Contains(err.Error(), "not waiting for approval") {
		t.Fatalf("second delivery: %v", err)
	}
	if len(ran) != 1 {
		t.Fatalf("the call ran %d times", len(ran))
	}
}

// A run renews its claim as it goes, so a run (or one tool call) longer
// than the claim's ttl is never taken over while it is driven.
func TestClaimIsRenewedWhileDriving(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.NewMemory()
		// One tool call of 9 s: no journal write renews the claim meanwhile.
		p := &probe{name: "p", effect: llm.EffectReadOnly, sleep: 9 * time.Second}
		m := modeltest.NewScript(modeltest.ToolCalls(call("", "p", "a")), modeltest.Text("done"))
		a := agent.New(agent.Config{Model: m, Tools: set(t, p), Store: st, Owner: "me", ClaimTTL: 3 * time.Second, NewID: func() string { return "long" }})
		done := make(chan error)
		go func() {
			_, err := a.Run(context.Background(), agent.Prompt("go"))
			done <- err
		}()
		for range 4 { // 8 s into a run with a 3 s claim
			time.Sleep(2 * time.Second)
			if err := st.Claim(context.Background(), "long", "thief", time.Second); !errors.Is(err, store.ErrClaimed) {
				t.Fatalf("another owner could claim the running run: %v", err)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := st.Claim(context.Background(), "long", "thief", time.Second); err != nil {
			t.Fatalf("the finished run's claim was not released: %v", err)
		}
	})
}

// A decision the machine refuses (edited arguments that are not JSON)
// does not lose the run: it still waits, and good decisions resume it.
func TestBadDecisionKeepsTheRunWaiting(t *testing.T) {
	st := store.NewMemory()
	var ran []string
	tools := set(t, guardedTool(llm.EffectDestructive, &ran))
	m := modeltest.NewScript(modeltest.ToolCalls(pathCall("c1", "guarded_destructive", "x")), modeltest.Text("done"))
	a := agent.New(agent.Config{Model: m, Approver: suspender(), Tools: tools, Store: st})
	_, err := a.Run(context.Background(), agent.Prompt("go"))
	se := mustAs[*agent.SuspendedError](t, err)
	_, err = a.Resume(context.Background(), agent.Resumption{RunID: se.RunID, Decisions: []run.Decision{{CallID: "c1", Action: run.Edited, Arguments: `{"path":`}}})
	if !errors.Is(err, agent.ErrApproval) || !errors.Is(err, run.ErrProtocol) {
		t.Fatalf("err = %v", err)
	}
	if info, _ := st.Get(context.Background(), se.RunID); info.Status != store.StatusWaitingApproval {
		t.Fatalf("status = %s", info.Status)
	}
	res, err := a.Resume(context.Background(), agent.Resumption{RunID: se.RunID, Decisions: []run.Decision{{CallID: "c1", Action: run.Edited, Arguments: `{"path":"y"}`}}})
	if err != nil || res.Output != "done" || len(ran) != 1 || ran[0] != "y" {
		t.Fatalf("res = %+v, err = %v, ran %v", res, err, ran)
	}
}
