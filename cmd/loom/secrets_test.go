package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/loomtest"
)

// apiKey looks like no vendor's key, so no pattern recognises it: only
// knowing its value scrubs it.
const apiKey = "loomkey-9d2f7a41c6e8b035"

// storeHolds reports whether the run store's files (the database and
// its journal) hold b.
func (h *harness) storeHolds(b string) bool {
	h.t.Helper()
	matches, _ := filepath.Glob(h.store + "*")
	if len(matches) == 0 {
		h.t.Fatalf("no store at %s", h.store)
	}
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err != nil {
			h.t.Fatal(err)
		}
		if bytes.Contains(data, []byte(b)) {
			return true
		}
	}
	return false
}

// A provider error body that echoes the key (as some OpenAI-compatible
// servers and proxies do) reaches no output: not the text on stderr, not
// the JSON Lines, not the trace's exception, not the store.
func TestProviderErrorEchoingTheKeyIsScrubbed(t *testing.T) {
	echo := func() loomtest.Turn {
		return loomtest.Status(401, "invalid_api_key", "Incorrect API key provided: "+apiKey+". You can find your API key at https://example.com.")
	}
	for _, output := range []string{"text", "jsonl"} {
		t.Run(output, func(t *testing.T) {
			h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
				// A retried failure first: its retry line quotes the error too.
				loomtest.Status(500, "server_error", "upstream refused key "+apiKey),
				echo(),
			}})
			h.env["OPENAI_API_KEY"] = apiKey
			rcv := newOTLPReceiver(t)
			h.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = rcv.srv.URL
			r := h.run("run", "--output", output, "hello").want(t, 1)
			if len(h.srv.Requests()) != 2 {
				t.Fatalf("the server got %d requests, want 2\n%s", len(h.srv.Requests()), r)
			}
			if strings.Contains(r.stdout+r.stderr, apiKey) {
				t.Errorf("the key is printed\n%s", r)
			}
			if !strings.Contains(r.stdout+r.stderr, "Incorrect API key provided: [redacted]") {
				t.Errorf("the error is not shown, scrubbed\n%s", r)
			}
			deadline := time.Now().Add(5 * time.Second)
			for len(rcv.names()) == 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			rcv.mu.Lock()
			exported := rcv.raw.Bytes()
			rcv.mu.Unlock()
			if len(exported) == 0 {
				t.Fatal("no trace exported")
			}
			if bytes.Contains(exported, []byte(apiKey)) {
				t.Error("the trace export holds the key")
			}
			if !bytes.Contains(exported, []byte("[redacted]")) {
				t.Error("the trace export does not hold the error, scrubbed")
			}
			if h.storeHolds(apiKey) {
				t.Error("the store holds the key")
			}
		})
	}
}

// The model's text is scrubbed too, also when the key comes split across
// the deltas of a stream: in JSON Lines, the text deltas joined and the
// done line; in text mode, stdout.
func TestStreamedKeyIsScrubbed(t *testing.T) {
	answer := func() loomtest.Turn {
		t := loomtest.Text("The key in your environment is " + apiKey + ", keep it safe.")
		t.Chunk = 3
		return t
	}
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{answer(), answer()}})
	h.env["OPENAI_API_KEY"] = apiKey
	r := h.run("run", "--output", "jsonl", "what is my key").want(t, 0)
	var text strings.Builder
	for _, l := range ofType(lines(t, r.stdout), "text_delta") {
		text.WriteString(l["text"].(string))
	}
	done := ofType(lines(t, r.stdout), "done")
	if len(done) != 1 {
		t.Fatalf("no done line\n%s", r)
	}
	for what, s := range map[string]string{"the text deltas": text.String(), "the done line": done[0]["output"].(string), "the output": r.stdout + r.stderr} {
		if strings.Contains(s, apiKey) {
			t.Errorf("%s hold the key: %q", what, s)
		}
	}
	if !strings.Contains(text.String(), "environment is [redacted], keep it safe.") {
		t.Errorf("text deltas = %q", text.String())
	}
	r = h.run("run", "what is my key").want(t, 0)
	if r.stdout != "The key in your environment is [redacted], keep it safe.\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	if h.storeHolds(apiKey) {
		t.Error("the store holds the key")
	}
}

// Credentials in --base-url are used, but neither stored with the run nor
// printed in hints; resuming the run asks for them again.
func TestBaseURLCredentialsAreNotKept(t *testing.T) {
	const password = "pw-4e1b9c7d2a"
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		loomtest.Status(404, "model_not_found", "The model does not exist"),
		loomtest.Text("Resumed."),
	}})
	base := strings.Replace(h.srv.OpenAIURL(), "http://", "http://ada:"+password+"@", 1)
	r := h.run("run", "--base-url", base, "hello").want(t, 1)
	if strings.Contains(r.stdout+r.stderr, password) {
		t.Errorf("the password is printed\n%s", r)
	}
	if !strings.Contains(r.stderr, "check the model name") || !strings.Contains(r.stderr, "127.0.0.1") {
		t.Errorf("no hint naming the server\n%s", r)
	}
	if h.storeHolds(password) || h.storeHolds("ada:") {
		t.Error("the store holds the URL's credentials")
	}
	id := runIDFrom(t, r.stderr)
	// Without the credentials, resume says what to give.
	again := h.run("resume", id).want(t, 2)
	if !strings.Contains(again.stderr, "--base-url") || strings.Contains(again.stderr, password) {
		t.Errorf("resume without the credentials\n%s", again)
	}
	ok := h.run("resume", "--base-url", base, id).want(t, 0)
	if ok.stdout != "Resumed.\n" {
		t.Errorf("resume with them\n%s", ok)
	}
}
