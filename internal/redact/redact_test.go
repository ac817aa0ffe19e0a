package redact_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/loomkit/loom/internal/redact"
)

const key = "k3y-<9f&2\"a71\\c>+q"

func TestString(t *testing.T) {
	r := redact.New(key, "short", "")
	jsonForm, _ := json.Marshal(key)
	for in, want := range map[string]string{
		"the key is " + key + ".":                                 "the key is [redacted].",
		"json " + string(jsonForm):                                `json "[redacted]"`,
		"query ?k=" + url.QueryEscape(key):                        "query ?k=[redacted]",
		"path /" + url.PathEscape(key) + "/x":                     "path /[redacted]/x",
		"twice " + key + key:                                      "twice [redacted][redacted]",
		`Post "http://ada:pw@proxy.local:80/v1": refused`:         `Post "http://[redacted]@proxy.local:80/v1": refused`,
		"https://token@example.com and ftp://u:p@h/x":             "https://[redacted]@example.com and ftp://[redacted]@h/x",
		"https://example.com/a@b, mail ada@example.com":           "https://example.com/a@b, mail ada@example.com",
		"short is not scrubbed, nor ://@ alone":                   "short is not scrubbed, nor ://@ alone",
		"already https://[redacted]@example.com":                  "already https://[redacted]@example.com",
		"https://u:" + url.QueryEscape(key) + "@host/ and " + key: "https://[redacted]@host/ and [redacted]",
	} {
		if got := r.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	var nilR *redact.Redactor
	if got := nilR.String("http://a:b@h " + key); got != "http://[redacted]@h "+key {
		t.Errorf("nil Redactor: %q", got)
	}
	if b := []byte("nothing here"); &r.Bytes(b)[0] != &b[0] {
		t.Error("Bytes copies what it does not change")
	}
}

// A secret holding another is scrubbed whole.
func TestLongestFirst(t *testing.T) {
	r := redact.New("password1", "password1-and-more")
	if got := r.String("x password1-and-more y password1"); got != "x [redacted] y [redacted]" {
		t.Errorf("got %q", got)
	}
}

// However a text is cut into pieces, a Stream gives out what String gives
// for the whole, and no piece it gives out holds the secret.
func TestStreamSplits(t *testing.T) {
	r := redact.New(key)
	texts := []string{
		"before " + key + " after",
		key,
		"ends with " + key,
		"almost " + key[:len(key)-1] + " but not",
		"url https://ada:" + url.QueryEscape(key) + "@example.com/x then",
		"url at the end https://ada:pw@example.com",
		"plain text with no secret at all, http: and ://",
	}
	for _, text := range texts {
		want := r.String(text)
		for i := 0; i <= len(text); i++ {
			for j := i; j <= len(text); j++ {
				s := r.Stream()
				var got strings.Builder
				for _, piece := range []string{text[:i], text[i:j], text[j:]} {
					out := s.Next(piece)
					if strings.Contains(out, key) {
						t.Fatalf("%q cut at %d, %d: a piece out holds the key: %q", text, i, j, out)
					}
					got.WriteString(out)
				}
				got.WriteString(s.Flush())
				if got.String() != want {
					t.Fatalf("%q cut at %d, %d: %q, want %q", text, i, j, got.String(), want)
				}
			}
		}
	}
}

// A Writer scrubs a secret split across writes, and writes all once
// flushed.
func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := redact.New(key).Writer(&buf)
	for _, p := range []string{"a " + key[:3], key[3:9], key[9:] + " b\n", "tail " + key[:2]} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if strings.Contains(buf.String(), "tail "+key[:2]) {
		t.Error("the start of a possible secret was written before it was settled")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "a [redacted] b\ntail "+key[:2] {
		t.Errorf("got %q", got)
	}
	if w.Unwrap() != &buf {
		t.Error("Unwrap")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterError(t *testing.T) {
	w := redact.New(key).Writer(failingWriter{})
	if _, err := w.Write([]byte("hello\n")); err == nil {
		t.Fatal("the error is lost")
	}
}

// The log handler scrubs the message and every attribute that is or
// becomes text, in groups and in attributes given beforehand.
func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(redact.New(key).Handler(slog.NewJSONHandler(&buf, nil)))
	l = l.With("base", "http://ada:pw@h/v1")
	l.WithGroup("g").Warn("failed with "+key,
		"err", errors.New("body: "+key),
		"n", 42,
		slog.Group("inner", "s", key, "v", []string{key}),
		"stringer", stringer(key))
	out := buf.String()
	if strings.Contains(out, key) || strings.Contains(out, "ada:pw") {
		t.Fatalf("log holds a secret: %s", out)
	}
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	g := rec["g"].(map[string]any)
	if rec["msg"] != "failed with [redacted]" || g["n"] != 42.0 || g["err"] != "body: [redacted]" || rec["base"] != "http://[redacted]@h/v1" {
		t.Errorf("record = %v", rec)
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// Add is safe while others scrub.
func TestAddConcurrently(t *testing.T) {
	r := redact.New()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 200 {
				r.Add(fmt.Sprintf("secret-%d-%04d", i, j))
				r.String("secret-0-0001 and more")
			}
		})
	}
	wg.Wait()
	if got := r.String("secret-3-0199"); got != "[redacted]" {
		t.Errorf("got %q", got)
	}
}
