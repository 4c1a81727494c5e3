package lease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// numbered is a bucket status saying which read made it.
type numbered struct {
	jetstream.KeyValueStatus
	n int32
}

// gatedReads is a status read (statuses.read's f) that each blocks until
// released, numbered in the order they began.
type gatedReads struct {
	began   atomic.Int32
	started chan int32 // each read's number as it begins
	release chan error // each read ends with the next value sent
	ctxErr  []error    // under mu: the read's context's error when released
	mu      sync.Mutex
}

func newGatedReads() *gatedReads {
	return &gatedReads{started: make(chan int32, 16), release: make(chan error)}
}

func (g *gatedReads) f(ctx context.Context) (jetstream.KeyValueStatus, error) {
	n := g.began.Add(1)
	g.started <- n
	err := <-g.release
	g.mu.Lock()
	g.ctxErr = append(g.ctxErr, ctx.Err())
	g.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return numbered{n: n}, nil
}

func (g *gatedReads) waitStarted(t *testing.T, want int32) {
	t.Helper()
	select {
	case n := <-g.started:
		if n != want {
			t.Fatalf("read %d began, want %d", n, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("read %d never began", want)
	}
}

type answer struct {
	st  jetstream.KeyValueStatus
	err error
}

// ask calls s.read in a goroutine; pending: it returns once the call
// waits for a read that has not begun (s.next).
func ask(t *testing.T, ctx context.Context, s *statuses, g *gatedReads, pending bool) <-chan answer {
	t.Helper()
	out := make(chan answer, 1)
	go func() {
		st, err := s.read(ctx, g.f)
		out <- answer{st, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		waiting := s.next != nil
		s.mu.Unlock()
		if waiting || !pending || time.Now().After(deadline) {
			return out
		}
		time.Sleep(time.Millisecond)
	}
}

func got(t *testing.T, c <-chan answer) answer {
	t.Helper()
	select {
	case a := <-c:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("a caller never got its status")
		return answer{}
	}
}

func readNumber(a answer) int32 {
	if n, ok := a.st.(numbered); ok {
		return n.n
	}
	return 0
}

// TestASharedStatusReadBeganAfterItsCaller: callers asking while a read
// is under way get the next read (begun after they asked), never the one
// under way (TestStatusReadsAreShared: those asking together share it).
// The first caller giving up
// (its context) ends neither the read under way nor the next, and the
// others still get theirs; an error is each waiting caller's.
func TestASharedStatusReadBeganAfterItsCaller(t *testing.T) {
	var s statuses
	g := newGatedReads()
	ctxA, cancelA := context.WithCancel(context.Background())
	a := ask(t, ctxA, &s, g, false)
	g.waitStarted(t, 1)
	b := ask(t, context.Background(), &s, g, true) // read 1 under way: waits for read 2
	ctxC, cancelC := context.WithCancel(context.Background())
	c := ask(t, ctxC, &s, g, true)

	cancelA()
	if r := got(t, a); !errors.Is(r.err, context.Canceled) {
		t.Errorf("A gave up: got %v, want its context's error", r.err)
	}
	cancelC()
	if r := got(t, c); !errors.Is(r.err, context.Canceled) {
		t.Errorf("C gave up: got %v, want its context's error", r.err)
	}
	g.release <- nil // read 1 ends
	g.waitStarted(t, 2)
	e := ask(t, context.Background(), &s, g, true) // read 2 under way: waits for read 3
	g.release <- nil
	if r := got(t, b); r.err != nil || readNumber(r) != 2 {
		t.Errorf("B asked while read 1 was under way: got read %d (%v), want read 2", readNumber(r), r.err)
	}
	g.waitStarted(t, 3)
	boom := errors.New("stream info: timeout")
	g.release <- boom
	if r := got(t, e); !errors.Is(r.err, boom) {
		t.Errorf("E asked while read 2 was under way: got read %d (%v), want read 3's error", readNumber(r), r.err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, err := range g.ctxErr {
		if err != nil {
			t.Errorf("read %d ended by a caller giving up: %v", i+1, err)
		}
	}
	select {
	case n := <-g.started:
		t.Errorf("read %d began with nobody asking", n)
	default:
	}
}
