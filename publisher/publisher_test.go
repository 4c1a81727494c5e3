package publisher_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/schemas"
	"github.com/orderwatch/orderwatch/state"
)

const stream = "ORDERS"

func newPublisher(tb testing.TB, nc *nats.Conn, st publisher.Outbox, mod ...func(*publisher.Config)) *publisher.Publisher {
	tb.Helper()
	cfg := publisher.Config{Stream: stream, CreateStream: true, AckTimeout: 2 * time.Second, Idle: 50 * time.Millisecond, Logger: testLogger(tb)}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := publisher.New(nc, st, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestPublishJetStream(t *testing.T) {
	srv := runServer(t, nil)
	st := openStore(t, false)
	want := entries(1000, 100, 3) // 300 events, 3 per order
	commit(t, st, want)
	for _, e := range want[:3] {
		if err := schemas.Validate(e.Payload); err != nil {
			t.Fatalf("test event does not validate: %v", err)
		}
	}

	var acked atomic.Int64
	p := newPublisher(t, connect(t, srv.url()), st, func(c *publisher.Config) {
		c.MaxInFlight = 16 // several batches and refills
		c.BatchSize = 40
		c.OnPublished = func(n int, d time.Duration) {
			if d < 0 {
				t.Errorf("OnPublished latency %v", d)
			}
			acked.Add(int64(n))
		}
	})
	startRun(t, p)
	p.Notify()
	waitFor(t, 30*time.Second, "empty outbox", func() bool { return st.OutboxDepth() == 0 })
	if got := p.Published(); got != uint64(len(want)) {
		t.Errorf("Published() = %d, want %d", got, len(want))
	}
	if acked.Load() != int64(len(want)) {
		t.Errorf("OnPublished counted %d, want %d", acked.Load(), len(want))
	}
	if !p.Connected() {
		t.Error("Connected() = false")
	}

	_, js := plainConn(t, srv.url())
	got := readStream(t, js, stream)
	checkStream(t, got, want)

	// Entries committed later are picked up after Notify.
	more := entries(5000, 5, 1)
	commit(t, st, more)
	p.Notify()
	waitFor(t, 30*time.Second, "empty outbox", func() bool { return st.OutboxDepth() == 0 })
	checkStream(t, readStream(t, js, stream), append(want, more...))
}

// With one event per order nothing is held back: the stream holds the
// events in exact outbox order.
func TestPublishKeepsOutboxOrderAcrossOrders(t *testing.T) {
	srv := runServer(t, nil)
	st := openStore(t, false)
	want := entries(1, 500, 1)
	commit(t, st, want)
	p := newPublisher(t, connect(t, srv.url()), st, func(c *publisher.Config) { c.MaxInFlight = 64; c.BatchSize = 100 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, js := plainConn(t, srv.url())
	got := readStream(t, js, stream)
	checkStream(t, got, want)
	for i := range min(len(got), len(want)) {
		if got[i].MsgID != want[i].ID {
			t.Fatalf("stream message %d is %s, want outbox entry %d (%s)", i+1, got[i].Subject, i, want[i].Subject)
		}
	}
}

// NATS goes down while the sweep keeps committing: the outbox grows and
// nothing is lost; after the restart (same port and store) it drains with
// every event once, in order per order.
func TestOutageLosesNothing(t *testing.T) {
	srv := runServer(t, nil)
	st := openStore(t, false)
	var mu sync.Mutex
	var all []state.OutboxEntry
	add := func(es []state.OutboxEntry) {
		commit(t, st, es)
		mu.Lock()
		all = append(all, es...)
		mu.Unlock()
	}
	var errs atomic.Int64
	p := newPublisher(t, connect(t, srv.url()), st, func(c *publisher.Config) {
		c.MaxInFlight = 32
		c.BatchSize = 50
		c.AckTimeout = 500 * time.Millisecond
		c.OnError = func(error) { errs.Add(1) }
	})
	startRun(t, p)

	// A committer like the sweep: a page of events every 10 ms (20 orders
	// changing again and again), Notify after each commit.
	stopCommitting := make(chan struct{})
	committerDone := make(chan struct{})
	var pages atomic.Int64
	go func() {
		defer close(committerDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for s := 1; ; s++ {
			select {
			case <-stopCommitting:
				return
			case <-tick.C:
			}
			add(stepEntries(1, 20, s))
			pages.Add(1)
			p.Notify()
		}
	}()

	waitFor(t, 30*time.Second, "first events published", func() bool { return p.Published() >= 100 })
	srv.shutdown()
	waitFor(t, 30*time.Second, "disconnect noticed", func() bool { return !p.Connected() })
	depthAtOutage := st.OutboxDepth()
	pagesAtOutage := pages.Load()
	waitFor(t, 20*time.Second, "commits during the outage", func() bool { return pages.Load() >= pagesAtOutage+20 })
	if d := st.OutboxDepth(); d < depthAtOutage+19*20 {
		t.Errorf("outbox depth %d after 20 pages committed during the outage, %d at its start: it should grow", d, depthAtOutage)
	}

	srv.restart()
	close(stopCommitting)
	<-committerDone
	waitFor(t, 30*time.Second, "outbox drained after the restart", func() bool { return st.OutboxDepth() == 0 })
	if errs.Load() == 0 {
		t.Error("no failure reported during the outage")
	}
	mu.Lock()
	want := all
	mu.Unlock()
	_, js := plainConn(t, srv.url())
	checkStream(t, readStream(t, js, stream), want)
	if p.Published() < uint64(len(want)) {
		t.Errorf("Published() = %d, want >= %d", p.Published(), len(want))
	}
}

// A crash between the PubAck and the outbox delete puts the entries back:
// they are sent again, the stream drops them as duplicates, and the
// duplicate PubAcks count as acknowledgements.
func TestResendAfterCrashIsDeduplicated(t *testing.T) {
	srv := runServer(t, nil)
	want := entries(1, 50, 2)
	nc := connect(t, srv.url())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	st := openStore(t, false)
	commit(t, st, want)
	if err := newPublisher(t, nc, st).Flush(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("same state file", func(t *testing.T) {
		commit(t, st, want[20:70]) // re-committed with the same ids
		p := newPublisher(t, nc, st)
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if p.Published() != 50 || st.OutboxDepth() != 0 {
			t.Errorf("published %d, depth %d; want 50, 0", p.Published(), st.OutboxDepth())
		}
	})
	t.Run("second state file", func(t *testing.T) {
		// A restored backup: everything again.
		st2 := openStore(t, false)
		commit(t, st2, want)
		p := newPublisher(t, nc, st2)
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if p.Published() != uint64(len(want)) || st2.OutboxDepth() != 0 {
			t.Errorf("published %d, depth %d; want %d, 0", p.Published(), st2.OutboxDepth(), len(want))
		}
	})
	_, js := plainConn(t, srv.url())
	checkStream(t, readStream(t, js, stream), want)
}

// A publish fails while later publishes are in flight: the stream refuses
// one event of order 7 (its subject is full) while the other orders' events
// are stored. Order 7's next event is in the outbox right behind it and
// must not overtake it: it is stored only after the refused one got in.
func TestOrderPerOrderUnderFailure(t *testing.T) {
	srv := runServer(t, nil)
	_, js := plainConn(t, srv.url())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// One message per subject, new ones refused: a deterministic failure
	// of one publish in the middle of many.
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: stream, Subjects: []string{"orders.>"}, Storage: jetstream.FileStorage, Duplicates: time.Minute,
		MaxMsgsPerSubject: 1, Discard: jetstream.DiscardNew, DiscardNewPerSubject: true,
	})
	if err != nil {
		t.Fatal(err)
	}

	// Outbox: orders 1..60, step 1 then step 2 (order 7's step 2 right
	// behind its step 1 in the pipeline), then step 3.
	want := entries(1, 60, 3)
	var blocked state.OutboxEntry
	for _, e := range want {
		if strings.HasSuffix(e.Subject, ".7") {
			blocked = e // step 1 of order 7
			break
		}
	}
	// Occupy the subject of order 7's first event.
	if _, err := js.Publish(ctx, blocked.Subject, []byte("squatter"), jetstream.WithMsgID("squatter")); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, false)
	commit(t, st, want)

	failures := make(chan error, 100)
	p := newPublisher(t, connect(t, srv.url()), st, func(c *publisher.Config) {
		c.MaxInFlight = 64 // all of step 1 and more in flight at once
		c.OnError = func(err error) {
			select {
			case failures <- err:
			default:
			}
		}
	})
	startRun(t, p)
	select {
	case err := <-failures:
		if !strings.Contains(err.Error(), blocked.Subject) {
			t.Errorf("failure %q does not name the subject %s", err, blocked.Subject)
		}
	case <-ctx.Done():
		t.Fatal("no failure reported")
	}
	// While it fails, nothing of order 7 is stored, and other orders go on.
	waitFor(t, 30*time.Second, "other orders published", func() bool { return p.Published() >= 100 })
	for _, m := range readStream(t, js, stream) {
		if strings.HasSuffix(m.Subject, ".7") && m.MsgID != "squatter" {
			t.Fatalf("order 7's event %s stored while its first event is refused", m.Subject)
		}
	}
	// The operator frees the subject: the retry stores order 7 in order.
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(blocked.Subject)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "outbox drained", func() bool { return st.OutboxDepth() == 0 })
	checkStream(t, readStream(t, js, stream), want)
}

func TestCoreNATSDeliversToLiveSubscriber(t *testing.T) {
	srv := runServer(t, func(o *server.Options) { o.JetStream = false })
	st := openStore(t, false)
	want := entries(1, 30, 2)
	commit(t, st, want)

	msgs := subscribeAll(t, srv.url(), len(want))

	p := newPublisher(t, connect(t, srv.url()), st, func(c *publisher.Config) { c.Stream = ""; c.BatchSize = 7 })
	if err := p.EnsureStream(context.Background()); err != nil {
		t.Errorf("EnsureStream in core mode: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st.OutboxDepth() != 0 || p.Published() != uint64(len(want)) {
		t.Errorf("depth %d, published %d", st.OutboxDepth(), p.Published())
	}
	for i, e := range want {
		select {
		case m := <-msgs:
			if m.Subject != e.Subject || string(m.Data) != string(e.Payload) ||
				m.Header.Get("Nats-Msg-Id") != e.ID || m.Header.Get("Content-Type") != publisher.ContentType {
				t.Fatalf("message %d: %s id %s, want %s id %s", i, m.Subject, m.Header.Get("Nats-Msg-Id"), e.Subject, e.ID)
			}
		case <-ctx.Done():
			t.Fatalf("received %d of %d messages", i, len(want))
		}
	}

	// Run picks up later commits.
	startRun(t, p)
	more := entries(100, 3, 1)
	commit(t, st, more)
	p.Notify()
	for i := range more {
		select {
		case m := <-msgs:
			if m.Subject != more[i].Subject {
				t.Errorf("message %s, want %s", m.Subject, more[i].Subject)
			}
		case <-ctx.Done():
			t.Fatal("Run did not publish")
		}
	}
}

func TestFlushAndRunLifecycle(t *testing.T) {
	srv := runServer(t, nil)
	st := openStore(t, false)
	nc := connect(t, srv.url())
	p := newPublisher(t, nc, st)

	t.Run("flush of an empty outbox", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("flush drains and returns", func(t *testing.T) {
		commit(t, st, entries(1, 100, 2))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if st.OutboxDepth() != 0 {
			t.Errorf("depth %d after Flush", st.OutboxDepth())
		}
	})
	t.Run("flush while run drains", func(t *testing.T) {
		stop := startRun(t, p)
		defer stop()
		commit(t, st, entries(1000, 100, 2))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if st.OutboxDepth() != 0 {
			t.Errorf("depth %d after Flush", st.OutboxDepth())
		}
	})
	t.Run("run stops on cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		commit(t, st, entries(2000, 50, 1))
		p.Notify()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run after cancel: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
	})
	t.Run("flush bounded by ctx while NATS is down", func(t *testing.T) {
		srv.shutdown()
		waitFor(t, 30*time.Second, "disconnect", func() bool { return !p.Connected() })
		commit(t, st, entries(3000, 5, 1))
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := p.Flush(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "entries left") {
			t.Errorf("Flush with NATS down = %v, want a deadline error counting the entries left", err)
		}
		if st.OutboxDepth() == 0 {
			t.Error("outbox empty although NATS is down")
		}
		// NATS back: the same publisher drains.
		srv.restart()
		ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if st.OutboxDepth() != 0 {
			t.Errorf("depth %d", st.OutboxDepth())
		}
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	srv := runServer(t, nil)
	nc := connect(t, srv.url())
	st := openStore(t, false)
	for name, cfg := range map[string]publisher.Config{
		"wildcard prefix":         {Stream: stream, SubjectPrefix: "orders.>"},
		"empty token":             {Stream: stream, SubjectPrefix: "orders..x"},
		"stream name with dot":    {Stream: "ORD.ERS"},
		"window beyond retention": {Stream: stream, DuplicateWindow: time.Hour, MaxAge: time.Minute},
		"negative max bytes":      {Stream: stream, MaxBytes: -5},
	} {
		if _, err := publisher.New(nc, st, cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	if _, err := publisher.New(nil, st, publisher.Config{}); err == nil {
		t.Error("New accepted a nil connection")
	}
	if _, err := publisher.New(nc, nil, publisher.Config{}); err == nil {
		t.Error("New accepted a nil outbox")
	}
}

func TestReady(t *testing.T) {
	srv := runServer(t, nil)
	st := openStore(t, false)
	nc := connect(t, srv.url())
	p := newPublisher(t, nc, st)
	if err := p.Ready(); err == nil {
		t.Error("ready before the stream was checked")
	}
	stop := startRun(t, p)
	defer stop()
	waitFor(t, 30*time.Second, "ready", func() bool { return p.Ready() == nil })
	srv.shutdown()
	waitFor(t, 30*time.Second, "not ready while NATS is down", func() bool { return p.Ready() != nil })
	srv.restart()
	waitFor(t, 20*time.Second, "ready again", func() bool { return p.Ready() == nil })
}
