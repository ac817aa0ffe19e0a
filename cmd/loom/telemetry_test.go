package main

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
)

// otlpReceiver is an OTLP/HTTP trace endpoint on loopback that keeps what
// it is sent.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	attrs map[string]string // resource attributes
	raw   bytes.Buffer      // every body, decoded
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{attrs: map[string]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not a trace export", http.StatusBadRequest)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.raw.Write(b)
		for _, rs := range msg.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				r.attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			for _, ss := range rs.GetScopeSpans() {
				r.spans = append(r.spans, ss.GetSpans()...)
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.spans {
		out = append(out, s.GetName())
	}
	return out
}

// With the standard OTLP variables set, loom exports a run's trace: the
// run, each model call and each tool call, nested, under service.name
// loom, and no prompt text unless content capture is asked for.
func TestTraceExport(t *testing.T) {
	for _, capture := range []bool{false, true} {
		name := "content off"
		if capture {
			name = "content on"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
				call("c1", "read_file", `{"path":"a.txt"}`),
				loomtest.Text("It says alpha."),
			}})
			h.writeFile("a.txt", "alpha-secret-7c1\n")
			rcv := newOTLPReceiver(t)
			h.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = rcv.srv.URL
			if capture {
				h.env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
			}
			args := []string{"run", "--yes", "what does a.txt say, prompt-marker-93d"}
			if capture {
				args = append(args, "--no-stream") // the blocking path, traced the same way
			}
			h.run(args...).want(t, 0)

			// loom flushes on exit; allow the receiver a moment anyway.
			deadline := time.Now().Add(5 * time.Second)
			for len(rcv.names()) < 4 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			got := strings.Join(rcv.names(), ",")
			for _, want := range []string{"invoke_agent loom", "chat test-model", "execute_tool read_file"} {
				if !strings.Contains(got, want) {
					t.Errorf("no %q span among %s", want, got)
				}
			}
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			var root *tracepb.Span
			for _, s := range rcv.spans {
				if strings.HasPrefix(s.GetName(), "invoke_agent") {
					root = s
				}
			}
			if root == nil {
				t.Fatalf("no agent span among %s", got)
			}
			chats := 0
			for _, s := range rcv.spans {
				if s == root {
					continue
				}
				if !bytes.Equal(s.GetParentSpanId(), root.GetSpanId()) || !bytes.Equal(s.GetTraceId(), root.GetTraceId()) {
					t.Errorf("span %s is not a child of the run's span", s.GetName())
				}
				if strings.HasPrefix(s.GetName(), "chat") {
					chats++
				}
			}
			if chats != 2 {
				t.Errorf("%d model call spans, want 2", chats)
			}
			if rcv.attrs["service.name"] != "loom" {
				t.Errorf("resource attributes %v, want service.name loom", rcv.attrs)
			}
			leaked := bytes.Contains(rcv.raw.Bytes(), []byte("prompt-marker-93d")) || bytes.Contains(rcv.raw.Bytes(), []byte("alpha-secret-7c1"))
			if leaked != capture {
				t.Errorf("prompt or file content in the export: %v, want %v", leaked, capture)
			}
		})
	}
}

// An OTLP protocol loom does not speak is a configuration error, not a
// silent loss of traces.
func TestTraceExportRefusesGRPC(t *testing.T) {
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("unused")}})
	h.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:4317"
	h.env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
	r := h.run("run", "x").want(t, 2)
	if !strings.Contains(r.stderr, "OTLP/HTTP") {
		t.Errorf("stderr: %s", r.stderr)
	}
}

// spanAttr returns the value of s's attribute key, as a string.
func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			v := kv.GetValue()
			if b, ok := v.GetValue().(*commonpb.AnyValue_BoolValue); ok {
				return strconv.FormatBool(b.BoolValue)
			}
			return v.GetStringValue()
		}
	}
	return ""
}

// loom resume traces the run it continues like loom run does: a run span
// marked resumed, with the run's id and conversation, above the resumed
// run's model and tool spans, in a trace of its own.
func TestTraceExportResume(t *testing.T) {
	for _, noStream := range []bool{false, true} {
		name := "stream"
		if noStream {
			name = "no-stream"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
				{Parts: []llm.Part{llm.Text{Text: "too late"}}, HeaderDelay: 30 * time.Second},
				call("c1", "read_file", `{"path":"a.txt"}`),
				loomtest.Text("It says alpha."),
			}})
			h.writeFile("a.txt", "alpha\n")
			rcv := newOTLPReceiver(t)
			h.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = rcv.srv.URL
			r := h.start("run", "read a.txt")
			r.waitFor(t, "the run id", func(_, stderr string) bool { return strings.Contains(stderr, "run_") })
			waitRequests(t, h.srv, 1)
			r.cmd.Process.Signal(syscall.SIGINT)
			id := runIDFrom(t, r.wait(t).want(t, 130).stderr)
			first := rcv.waitSpans(t, 2) // the interrupted run and its model call
			args := []string{"resume", "--yes", id}
			if noStream {
				args = append(args, "--no-stream")
			}
			h.run(args...).want(t, 0)
			all := rcv.waitSpans(t, len(first)+4)

			var orig, resumed *tracepb.Span
			for _, s := range all {
				if !strings.HasPrefix(s.GetName(), "invoke_agent") {
					continue
				}
				if spanAttr(s, "loom.run.resumed") == "true" {
					resumed = s
				} else {
					orig = s
				}
			}
			if orig == nil || resumed == nil {
				t.Fatalf("spans %s: want the interrupted run's and the resumed run's", names(all))
			}
			if got := spanAttr(resumed, "loom.run.id"); got != id {
				t.Errorf("resumed run span: loom.run.id %q, want %q", got, id)
			}
			conv := spanAttr(orig, "gen_ai.conversation.id")
			if conv == "" || spanAttr(resumed, "gen_ai.conversation.id") != conv {
				t.Errorf("conversation: resumed %q, first run %q; want the same, not empty", spanAttr(resumed, "gen_ai.conversation.id"), conv)
			}
			if bytes.Equal(resumed.GetTraceId(), orig.GetTraceId()) {
				t.Error("the resumed run shares the interrupted run's trace")
			}
			var under []string
			for _, s := range all {
				if bytes.Equal(s.GetParentSpanId(), resumed.GetSpanId()) && bytes.Equal(s.GetTraceId(), resumed.GetTraceId()) {
					under = append(under, s.GetName())
				}
			}
			slices.Sort(under)
			if want := []string{"chat test-model", "chat test-model", "execute_tool read_file"}; !slices.Equal(under, want) {
				t.Errorf("spans under the resumed run %v, want %v", under, want)
			}
		})
	}
}

// waitSpans waits until at least n spans were received and returns them.
func (r *otlpReceiver) waitSpans(t *testing.T, n int) []*tracepb.Span {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		spans := slices.Clone(r.spans)
		r.mu.Unlock()
		if len(spans) >= n || time.Now().After(deadline) {
			return spans
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func names(spans []*tracepb.Span) string {
	var out []string
	for _, s := range spans {
		out = append(out, s.GetName())
	}
	return strings.Join(out, ",")
}

// loom run --temporal traces the run as a client span, and the trace
// context goes through Temporal to loom worker, whose model and tool
// spans (under the activities' spans) land in the same trace; the worker
// sends its spans when it stops, and the progress queries are not traced.
func TestTemporalTraceExport(t *testing.T) {
	addr := temporalAddr(t)
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		call("c1", "read_file", `{"path":"a.txt"}`),
		loomtest.Text("Done on Temporal."),
	}})
	h.writeFile("a.txt", "alpha\n")
	rcv := newOTLPReceiver(t)
	h.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = rcv.srv.URL
	queue := "loom-cli-test-" + strings.ToLower(rand.Text()[:10])
	w := h.start("worker", "--temporal", addr, "--queue", queue)
	w.waitFor(t, "the worker to start", func(_, stderr string) bool { return strings.Contains(stderr, "loom worker: task queue") })
	r := h.run("run", "--temporal", addr, "--queue", queue, "--yes", "--output", "jsonl", "read a.txt").want(t, 0)
	id := fmt.Sprint(lines(t, r.stdout)[0]["run_id"])
	w.cmd.Process.Signal(syscall.SIGINT)
	w.wait(t).want(t, 130)

	// Both processes have ended: what they sent is all there is.
	rcv.mu.Lock()
	spans := slices.Clone(rcv.spans)
	rcv.mu.Unlock()
	byID := map[string]*tracepb.Span{}
	var root *tracepb.Span
	for _, s := range spans {
		byID[string(s.GetSpanId())] = s
		if s.GetName() == "invoke_agent loom" && spanAttr(s, "loom.run.id") == id {
			root = s
		}
	}
	if root == nil {
		t.Fatalf("no run span for %s among %s", id, names(spans))
	}
	if root.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || len(root.GetParentSpanId()) != 0 {
		t.Errorf("run span: kind %v, parent %x; want a client span at the root", root.GetKind(), root.GetParentSpanId())
	}
	// underRoot says whether s descends from the run span, and through
	// which span names.
	underRoot := func(s *tracepb.Span) (bool, []string) {
		var path []string
		for range len(spans) {
			p, ok := byID[string(s.GetParentSpanId())]
			if !ok {
				return false, path
			}
			if p == root {
				return true, path
			}
			path = append(path, p.GetName())
			s = p
		}
		return false, path
	}
	var chats, tools int
	for _, s := range spans {
		name := s.GetName()
		if strings.Contains(name, "Query") {
			t.Errorf("a query was traced: %s", name)
		}
		if !strings.HasPrefix(name, "chat ") && !strings.HasPrefix(name, "execute_tool ") {
			continue
		}
		ok, path := underRoot(s)
		if !ok || !bytes.Equal(s.GetTraceId(), root.GetTraceId()) {
			t.Errorf("%s is not in the run's trace (ancestors %v)", name, path)
			continue
		}
		if len(path) == 0 || !strings.HasPrefix(path[0], "RunActivity:") {
			t.Errorf("%s: ancestors %v, want an activity's span first", name, path)
		}
		switch name {
		case "chat test-model":
			chats++
		case "execute_tool read_file":
			tools++
		}
	}
	if chats != 2 || tools != 1 {
		t.Errorf("%d model spans and %d tool spans in the run's trace, want 2 and 1; spans %s", chats, tools, names(spans))
	}
}
