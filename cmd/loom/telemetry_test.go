package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

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
