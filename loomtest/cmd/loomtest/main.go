// Command loomtest serves the loomtest wire server: a fake OpenAI Chat
// Completions and Anthropic Messages API that plays a script of turns.
//
//	go run ./loomtest/cmd/loomtest -addr 127.0.0.1:8089 -script script.json
//
// Without -script every request gets a short text answer. The script file
// format is documented at loomtest.ReadScript. The server logs one line per
// request and stops on interrupt.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8089", "address to listen on")
	scriptPath := flag.String("script", "", "script file (JSON; see loomtest.ReadScript); default: answer every request with a short text")
	repeat := flag.Bool("repeat", false, "start the script over when it runs out")
	quiet := flag.Bool("quiet", false, "do not log requests")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *addr, *scriptPath, *repeat, *quiet); err != nil {
		fmt.Fprintln(os.Stderr, "loomtest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, scriptPath string, repeat, quiet bool) error {
	cfg := loomtest.Config{
		Turns:  []loomtest.Turn{loomtest.Text("Hello from loomtest.").WithUsage(llm.Usage{InputTokens: 10, OutputTokens: 5})},
		Repeat: true,
	}
	if scriptPath != "" {
		f, err := os.Open(scriptPath)
		if err != nil {
			return err
		}
		cfg, err = loomtest.ReadScript(f)
		f.Close()
		if err != nil {
			return err
		}
		cfg.Repeat = cfg.Repeat || repeat
	}
	cfg.NoRecord = true // a long-running server must not pile up requests
	srv := loomtest.New(cfg)
	defer srv.Close()

	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	var h http.Handler = srv
	if !quiet {
		h = logRequests(srv)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	log.Printf("loomtest: serving on http://%s (OpenAI base URL http://%s/v1, Anthropic base URL http://%s)", l.Addr(), l.Addr(), l.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		hs.Close()
		srv.Close() // end silences and delays
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			log.Printf("%s %s -> %d in %v", r.Method, r.URL.Path, sw.status, time.Since(start).Round(time.Microsecond))
		}()
		next.ServeHTTP(sw, r)
	})
}
