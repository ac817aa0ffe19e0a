package temporal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/tool"
)

// childEnv makes the test binary a worker process (see TestMain): its
// value is a childSpec in JSON.
const childEnv = "LOOM_TEMPORAL_TEST_WORKER"

// childSpec says what a worker process does.
type childSpec struct {
	Addr  string `json:"addr"`
	Queue string `json:"queue"`
	Dir   string `json:"dir"`
	// Hang is where the worker hangs until it is killed: "tools" (in
	// every tool) or "model" (in the first model call).
	Hang string `json:"hang"`
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(childWorker(spec))
	}
	os.Exit(m.Run())
}

// childWorker runs a worker until the process is killed.
func childWorker(spec string) int {
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := client.Dial(client.Options{HostPort: s.Addr, Logger: quietLogger{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	reg, err := crashRegistry(s.Dir, s.Hang)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w, err := NewWorker(c, reg, &WorkerOptions{TaskQueue: s.Queue, Worker: workerOptions()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := w.Run(worker.InterruptCh()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// logLine appends a line to dir/name: one write, so lines of processes
// killed at any moment are whole.
func logLine(dir, name, line string) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		panic(err)
	}
}

func logLines(t *testing.T, dir, name string) []string {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(data), " ", "_"))
}

// hang waits for ctx (a killed process never returns).
func hang(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		return nil
	}
}

// crashRegistry is the registry of the crash tests, the same in every
// process: a model that plays, by the length of its transcript, a deploy
// call (destructive), a scan call (read-only) and a final answer, and
// writes each call to dir/model.log; tools that write each start to
// dir/<tool>.log. hang says where a worker process hangs.
func crashRegistry(dir, hangIn string) (Registry, error) {
	m := model.Funcs{GenerateFunc: func(ctx context.Context, req llm.Request) (llm.Response, error) {
		turn := len(req.Messages) / 2
		logLine(dir, "model.log", fmt.Sprintf("turn%d", turn))
		if hangIn == "model" && turn == 0 {
			if err := hang(ctx); err != nil {
				return llm.Response{}, &model.Error{Kind: model.KindTimeout, Err: err}
			}
		}
		switch turn {
		case 0:
			return modeltest.Response(llm.FinishToolCalls, modeltest.Call("d1", "deploy", `{"text":"prod"}`)), nil
		case 1:
			return modeltest.Response(llm.FinishToolCalls, modeltest.Call("s1", "scan", `{"text":"disk"}`)), nil
		}
		return modeltest.Response(llm.FinishStop, llm.Text{Text: "done"}), nil
	}}
	mk := func(name string, effect llm.Effect) tool.Tool {
		return tool.Func(name, "A tool of the crash tests.", func(ctx context.Context, in textIn) (string, error) {
			ci, _ := CallInfoFrom(ctx)
			logLine(dir, name+".log", fmt.Sprintf("start:%d:%s", ci.Attempt, ci.Key))
			if hangIn == "tools" {
				if err := hang(ctx); err != nil {
					return "", err
				}
			}
			return name + " " + in.Text + " ok", nil
		}, &tool.FuncOptions[textIn]{Effect: effect})
	}
	tools, err := tool.NewSet(mk("deploy", llm.EffectDestructive), mk("scan", llm.EffectReadOnly))
	if err != nil {
		return Registry{}, err
	}
	// The workers of one machine share a blob directory.
	blobs, err := NewDirBlobs(filepath.Join(dir, "blobs"))
	if err != nil {
		return Registry{}, err
	}
	return Registry{Models: map[string]model.Model{"m": m}, Tools: tools, Blobs: blobs}, nil
}

// child is a worker process.
type child struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

func startChild(t *testing.T, s childSpec) *child {
	t.Helper()
	spec, _ := json.Marshal(s)
	ch := &child{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	ch.cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	ch.cmd.Stdout, ch.cmd.Stderr = &ch.out, &ch.out
	if err := ch.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.kill(t) })
	return ch
}

// kill sends SIGKILL: the worker gets no chance to finish anything.
func (ch *child) kill(t *testing.T) {
	if ch.cmd.ProcessState != nil {
		return
	}
	_ = ch.cmd.Process.Signal(syscall.SIGKILL)
	_ = ch.cmd.Wait()
	if ch.out.Len() > 0 {
		t.Logf("worker process %d said: %s", ch.cmd.Process.Pid, ch.out.String())
	}
}

// waitLines waits until dir/name has n lines.
func waitLines(t *testing.T, dir, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(logLines(t, dir, name)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s has %v, waited for %d lines", name, logLines(t, dir, name), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// modelActivities counts the model activities scheduled in the
// workflow's history (a retried attempt is not scheduled again).
func modelActivities(t *testing.T, c client.Client, id string) int {
	t.Helper()
	n := 0
	it := c.GetWorkflowHistory(testContext(t, 10*time.Second), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == ActivityModel {
			n++
		}
	}
	return n
}

// ADVERSARIAL 71 (and 70 for completed steps): worker processes are
// SIGKILLed while a destructive tool runs and then while a read-only tool
// runs. Other workers finish the run: nothing is lost, the destructive
// call is not run a second time (it is answered with WorkerLost), the
// read-only one is run again, and no completed model call is made again.
func TestServerWorkerKilledDuringTools(t *testing.T) {
	c := serverClient(t)
	ctx := testContext(t, 2*time.Minute)
	dir := t.TempDir()
	s := childSpec{Addr: os.Getenv("LOOM_TEMPORAL_ADDR"), Queue: queueName(t), Dir: dir, Hang: "tools"}

	a := startChild(t, s)
	h, err := Start(ctx, c, Input{Model: "m", Tools: []string{"deploy", "scan"}, Run: run.Config{Prompt: llm.UserText("ship"), MaxTurns: run.Turns(5)}, Options: fastOptions()}, client.StartWorkflowOptions{TaskQueue: s.Queue})
	if err != nil {
		t.Fatal(err)
	}
	waitLines(t, dir, "deploy.log", 1)
	a.kill(t)

	b := startChild(t, s)
	waitLines(t, dir, "scan.log", 1)
	b.kill(t)

	reg, err := crashRegistry(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, c, s.Queue, reg)
	resp, err := h.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckHistory(resp.Messages); err != nil {
		t.Fatal(err)
	}
	if resp.Output != "done" || len(resp.Messages) != 6 {
		t.Fatalf("output %q, %d messages", resp.Output, len(resp.Messages))
	}
	deploy, scan := resp.Messages[2].ToolResults()[0], resp.Messages[4].ToolResults()[0]
	if deploy.Content != WorkerLost || !deploy.IsError {
		t.Fatalf("the deploy call was answered %+v, want WorkerLost", deploy)
	}
	if scan.Content != "scan disk ok" || scan.IsError {
		t.Fatalf("the scan call was answered %+v", scan)
	}
	key := h.WorkflowID + "/1/d1"
	if got := logLines(t, dir, "deploy.log"); len(got) != 1 || got[0] != "start:1:"+key {
		t.Fatalf("deploy ran %v; want once, with idempotency key %s", got, key)
	}
	if got := logLines(t, dir, "scan.log"); len(got) != 2 || !strings.HasPrefix(got[0], "start:1:") || !strings.HasPrefix(got[1], "start:2:") {
		t.Fatalf("scan ran %v; want twice (it is read-only)", got)
	}
	if got := strings.Join(logLines(t, dir, "model.log"), " "); got != "turn0 turn1 turn2" {
		t.Fatalf("model calls %s; each turn must be called once", got)
	}
	if n := modelActivities(t, c, h.WorkflowID); n != 3 {
		t.Fatalf("%d model activities in the history, want 3", n)
	}
}

// ADVERSARIAL 70: a worker SIGKILLed during a model call: the call is
// retried by another worker, and the run goes on.
func TestServerWorkerKilledDuringModelCall(t *testing.T) {
	c := serverClient(t)
	ctx := testContext(t, 2*time.Minute)
	dir := t.TempDir()
	s := childSpec{Addr: os.Getenv("LOOM_TEMPORAL_ADDR"), Queue: queueName(t), Dir: dir, Hang: "model"}
	a := startChild(t, s)
	h, err := Start(ctx, c, Input{Model: "m", Tools: []string{"deploy", "scan"}, Run: run.Config{Prompt: llm.UserText("ship"), MaxTurns: run.Turns(5)}, Options: fastOptions()}, client.StartWorkflowOptions{TaskQueue: s.Queue})
	if err != nil {
		t.Fatal(err)
	}
	waitLines(t, dir, "model.log", 1)
	a.kill(t)
	reg, err := crashRegistry(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, c, s.Queue, reg)
	resp, err := h.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Output != "done" || len(resp.Calls) != 3 {
		t.Fatalf("output %q, %d model calls recorded", resp.Output, len(resp.Calls))
	}
	if got := strings.Join(logLines(t, dir, "model.log"), " "); got != "turn0 turn0 turn1 turn2" {
		t.Fatalf("model calls %s; want turn 0 twice (the killed call, retried), the others once", got)
	}
	if got := logLines(t, dir, "deploy.log"); len(got) != 1 {
		t.Fatalf("deploy ran %v", got)
	}
}
