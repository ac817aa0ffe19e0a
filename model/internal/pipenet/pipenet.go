// Package pipenet is an in-memory network for HTTP tests that run inside a
// testing/synctest bubble, where loopback sockets cannot be used (a
// goroutine blocked on a socket keeps the bubble from ever being idle, so
// the fake clock would not advance). Connections are net.Pipe pairs.
//
// A typical test:
//
//	synctest.Test(t, func(t *testing.T) {
//		client, stop := pipenet.Serve(handler)
//		defer stop()
//		// use client against http://pipenet/...
//	})
//
// It is meant for tests only. A Listener is safe for concurrent use.
package pipenet

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
)

// Listener is a net.Listener whose connections come from Dial.
type Listener struct {
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

// Listen returns a new Listener.
func Listen() *Listener {
	return &Listener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept waits for the next Dial.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and makes later Dials fail with connection refused.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

// Addr returns a placeholder address.
func (l *Listener) Addr() net.Addr { return addr{} }

// ErrRefused is returned by Dial on a closed Listener.
var ErrRefused = errors.New("pipenet: connection refused")

// Dial connects to the listener; it has the signature of
// http.Transport.DialContext and ignores network and address.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, ErrRefused
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type addr struct{}

func (addr) Network() string { return "pipe" }
func (addr) String() string  { return "pipenet" }

// Serve serves h on a new Listener and returns a client whose every
// request reaches h (whatever the URL's host), and a function that shuts
// both down: it cancels every request's context, closes the connections
// and waits for the handlers to return. Call it before the bubble ends.
func Serve(h http.Handler) (*http.Client, func()) {
	l := Listen()
	base, cancel := context.WithCancel(context.Background())
	// Count connections from the server's own hooks: StateNew is reported
	// before Serve hands the connection on, StateClosed after its last
	// handler returned, so the count is right whenever Serve has returned.
	var conns sync.WaitGroup
	srv := &http.Server{
		Handler:     h,
		BaseContext: func(net.Listener) context.Context { return base },
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				conns.Add(1)
			case http.StateClosed, http.StateHijacked:
				conns.Done()
			}
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(l)
	}()
	tr := &http.Transport{DialContext: l.Dial}
	client := &http.Client{Transport: tr}
	return client, func() {
		cancel()
		tr.CloseIdleConnections()
		srv.Close()
		<-done
		conns.Wait()
	}
}
