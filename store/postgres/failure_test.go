package postgres

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomkit/loom/store"
)

// proxy is a TCP proxy between the store and the test server that can stop
// passing bytes on in either direction (a server that stops answering, or
// a network that drops packets) and cut every connection (a lost
// connection).
type proxy struct {
	l      net.Listener
	target string

	mu      sync.Mutex
	conns   []net.Conn
	frozen  [2]bool       // [up (to the server), down (to the client)]
	thawed  chan struct{} // closed and replaced when frozen changes
	stopped map[int]chan struct{}
	held    chan struct{} // gets a value whenever bytes are held back
}

const (
	up   = 0
	down = 1
)

// newProxy starts a proxy to the test server and returns it and the URL
// of the server through it.
func newProxy(t *testing.T) (*proxy, string) {
	t.Helper()
	u, err := url.Parse(serverURL(t))
	if err != nil {
		t.Fatalf("LOOM_POSTGRES_URL: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: u.Host, thawed: make(chan struct{}), held: make(chan struct{}, 1)}
	go p.serve()
	t.Cleanup(func() {
		l.Close()
		p.thaw(up)
		p.thaw(down)
		p.cut()
	})
	u.Host = l.Addr().String()
	return p, u.String()
}

func (p *proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pipe(c, s, up)
		go p.pipe(s, c, down)
	}
}

// pipe copies from src to dst, holding each chunk back while direction dir
// is frozen.
func (p *proxy) pipe(src, dst net.Conn, dir int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for {
				p.mu.Lock()
				frozen, thawed := p.frozen[dir], p.thawed
				p.mu.Unlock()
				if !frozen {
					break
				}
				select {
				case p.held <- struct{}{}:
				default:
				}
				<-thawed
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (p *proxy) set(dir int, frozen bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen[dir] = frozen
	close(p.thawed)
	p.thawed = make(chan struct{})
}

func (p *proxy) freeze(dir int) { p.set(dir, true) }
func (p *proxy) thaw(dir int)   { p.set(dir, false) }

// cut closes every connection through the proxy.
func (p *proxy) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// waitHeld waits until the proxy holds bytes back.
func (p *proxy) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-p.held:
	case <-time.After(30 * time.Second):
		t.Fatal("no bytes reached the frozen proxy within 30 s")
	}
}

// drainHeld forgets bytes held back so far.
func (p *proxy) drainHeld() {
	select {
	case <-p.held:
	default:
	}
}

// call runs fn in a goroutine and returns its error, failing t if it has
// not returned within a minute: a store call must never hang.
func call(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = fn()
	}()
	within(t, time.Minute, what, done)
	return err
}

// A server that stops answering ends each call at Options.Timeout with an
// error matching ErrUnavailable and context.DeadlineExceeded, or at the
// caller's deadline when that is sooner; once it answers again the store
// works again.
func TestServerStopsAnswering(t *testing.T) {
	p, u := newProxy(t)
	s, err := Open(ctx, u, &Options{Schema: newSchema(t), Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	last, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []int{up, down} {
		p.freeze(dir)
		calls := map[string]func() error{
			"Append": func() error { _, err := s.Append(ctx, "r", last, note(`"x"`)); return err },
			"Load":   func() error { _, err := s.Load(ctx, "r", 0); return err },
			"Claim":  func() error { return s.Claim(ctx, "r", "me", time.Minute) },
			"Get blob": func() error {
				_, err := s.Blobs().Get(ctx, blobKey(nil))
				return err
			},
		}
		for name, fn := range calls {
			err := call(t, name, fn)
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not answer within 200ms") {
				t.Errorf("%s with the %s direction frozen: %v, want ErrUnavailable and DeadlineExceeded, naming the timeout", name, []string{"up", "down"}[dir], err)
			}
		}
		// The caller's sooner deadline is the caller's: not the database's fault.
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := call(t, "Get", func() error { _, err := s.Get(short, "r"); return err })
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) {
			t.Errorf("Get with the caller's deadline: %v, want DeadlineExceeded only", err)
		}
		p.thaw(dir)
		info, err := s.Get(ctx, "r")
		if err != nil {
			t.Fatalf("once the server answers again: %v", err)
		}
		if last, err = s.Append(ctx, "r", info.LastSeq, note(`"after"`)); err != nil {
			t.Fatalf("once the server answers again: %v", err)
		}
	}
}

// A connection lost while a write is in flight is an ErrUnavailable error,
// at once (not at the timeout), that says whether the write may have been
// saved; reloading tells, and a stale retry is refused by the sequence
// check.
func TestConnectionLostDuringAppend(t *testing.T) {
	p, u := newProxy(t)
	schema := newSchema(t)
	s, err := Open(ctx, u, &Options{Schema: schema, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := admin(t)
	last, err := s.Append(ctx, "r", 0, created(t, store.RunHeader{}))
	if err != nil {
		t.Fatal(err)
	}
	// Prepare the append statement on the pool's connection, so that what
	// the proxy holds back below is the append itself.
	if last, err = s.Append(ctx, "r", last, note(`"warm"`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir   int
		saved bool
	}{
		{up, false},  // the statement never reached the server
		{down, true}, // the server committed it; its answer was lost
	} {
		p.drainHeld()
		p.freeze(c.dir)
		errc := make(chan error, 1)
		go func() { _, err := s.Append(ctx, "r", last, note(`"in flight"`)); errc <- err }()
		p.waitHeld(t)
		if c.dir == down {
			// The server's answer is held back; wait for its commit to
			// show before cutting.
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				var seq int64
				if err := db.QueryRow(ctx, `SELECT last_seq FROM `+schema+`.runs WHERE id = 'r'`).Scan(&seq); err != nil {
					t.Fatal(err)
				}
				if seq == last+1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the append did not commit within 30 s although only its answer was held back")
				}
			}
		}
		p.cut()
		p.thaw(c.dir)
		var err error
		select {
		case err = <-errc:
		case <-time.After(time.Minute):
			t.Fatal("Append did not return within a minute of its connection being cut")
		}
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "may or may not have been saved") {
			t.Fatalf("Append whose connection was cut: %v, want ErrUnavailable saying the write may have been saved", err)
		}
		recs, err := s.Load(ctx, "r", 0)
		if err != nil {
			t.Fatalf("reloading after the cut: %v", err)
		}
		if saved := recs[len(recs)-1].Seq == last+1; saved != c.saved {
			t.Fatalf("cut with the %s direction frozen: the write saved = %v, want %v", []string{"up", "down"}[c.dir], saved, c.saved)
		}
		if c.saved {
			_, err := s.Append(ctx, "r", last, note(`"retry"`))
			if !errors.Is(err, store.ErrConflict) {
				t.Fatalf("a blind retry of a write that was saved: %v, want a conflict", err)
			}
			last++
		}
		if last, err = s.Append(ctx, "r", last, note(`"next"`)); err != nil {
			t.Fatalf("appending after reloading: %v", err)
		}
	}
}

// Open of a server that does not answer ends at the timeout.
func TestOpenOfAServerThatDoesNotAnswer(t *testing.T) {
	p, u := newProxy(t)
	p.freeze(down)
	err := call(t, "Open", func() error {
		s, err := Open(ctx, u, &Options{Schema: newSchema(t), Timeout: 300 * time.Millisecond})
		if err == nil {
			s.Close()
		}
		return err
	})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Open: %v, want ErrUnavailable and DeadlineExceeded", err)
	}
}
