package publisher_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/state"
)

// window is the duplicate window of the streams of these tests: short, so
// that outages and stops longer than it take seconds.
const window = 2 * time.Second

// createStream creates the test stream with the short window (the
// publisher's own DuplicateWindow stays at its default of 10 min: the
// stream's applies); noAck makes the stream store messages without
// answering, as if every PubAck were lost.
func createStream(t *testing.T, url string, noAck bool) jetstream.JetStream {
	t.Helper()
	_, js := plainConn(t, url)
	_, err := js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{
		Name: stream, Subjects: []string{"orders.>"}, Storage: jetstream.FileStorage, Duplicates: window, NoAck: noAck,
	})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// lookups counts the publisher's look-ups by result, and its duplicates.
type lookups struct {
	mu   sync.Mutex
	by   map[string]int
	dups atomic.Int64
}

func (l *lookups) config(c *publisher.Config) {
	c.OnLookup = func(r string) { l.mu.Lock(); l.by[r]++; l.mu.Unlock() }
	c.OnDuplicate = func() { l.dups.Add(1) }
}

func (l *lookups) get(r string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.by[r]
}

// Proof 1 of issue 18.8: the stream stores the entries but every PubAck is
// lost; then NATS is down for longer than the duplicate window. The entries
// sent again after the outage are each stored once: the publisher looks
// them up on their subjects and deletes them without sending.
func TestLostPubAckThenOutageLongerThanWindow(t *testing.T) {
	srv := runServer(t, nil)
	createStream(t, srv.url(), true)
	st := openStore(t, false)
	want := entries(1, 20, 3)
	commit(t, st, want)
	var errs atomic.Int64
	l := &lookups{by: map[string]int{}}
	p := newPublisher(t, connect(t, srv.url()), st, l.config, func(c *publisher.Config) {
		c.AckTimeout = 300 * time.Millisecond
		c.OnError = func(error) { errs.Add(1) }
	})
	stop := startRun(t, p)
	waitFor(t, 30*time.Second, "a publish without its PubAck", func() bool { return errs.Load() > 0 })
	stop()
	_, js := plainConn(t, srv.url())
	if n := len(readStream(t, js, stream)); n == 0 {
		t.Fatal("nothing stored while the PubAcks were lost")
	}

	createStream(t, srv.url(), false) // acknowledgements work again after the outage
	srv.shutdown()
	time.Sleep(window + time.Second) // the outage outlasts the duplicate window
	srv.restart()
	startRun(t, p)
	waitFor(t, 30*time.Second, "outbox drained after the outage", func() bool { return st.OutboxDepth() == 0 })
	_, js = plainConn(t, srv.url())
	checkStream(t, readStream(t, js, stream), want)
	if l.get(publisher.LookupStored) == 0 {
		t.Errorf("look-ups %v: want the stored entries found", l.by)
	}
	t.Logf("look-ups %v, duplicate acks %d", l.by, l.dups.Load())
}

// Proof 2 of issue 18.8: the PubAcks arrive but the outbox deletes fail
// (the process is killed between the PubAck and the delete); a new process
// starts later than the duplicate window. It sends nothing twice.
func TestCrashBeforeDeleteThenRestartAfterWindow(t *testing.T) {
	srv := runServer(t, nil)
	createStream(t, srv.url(), false)
	st := &failingDeletes{Store: openStore(t, false)}
	want := entries(1, 20, 3)
	commit(t, st.Store, want)
	st.fail.Store(true)
	first := newPublisher(t, connect(t, srv.url()), st)
	stop := startRun(t, first)
	waitFor(t, 30*time.Second, "deletes to fail", func() bool { return st.attempts.Load() >= 2 })
	stop() // the "killed" process: its acknowledged entries stay in the outbox
	_, js := plainConn(t, srv.url())
	stored := len(readStream(t, js, stream))
	if stored == 0 || st.OutboxDepth() != len(want) {
		t.Fatalf("%d stored, outbox %d: want some stored and all %d still in the outbox", stored, st.OutboxDepth(), len(want))
	}

	time.Sleep(window + time.Second) // the restart comes later than the window
	st.fail.Store(false)
	l := &lookups{by: map[string]int{}}
	second := newPublisher(t, connect(t, srv.url()), st.Store, l.config)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := second.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkStream(t, readStream(t, js, stream), want)
	if l.get(publisher.LookupStored) != stored {
		t.Errorf("look-ups %v: want the %d stored entries found", l.by, stored)
	}
}

// Entries no process has sent are not looked up: entries committed after
// the publisher started, and after a restart the entries above the send
// mark the earlier process left (set a batch ahead: at most a batch of
// needless look-ups). A re-send inside the window (the send mark claims
// nothing was sent, so no look-up) is dropped by the stream and counted as
// a duplicate.
func TestNoLookupForEntriesNeverSent(t *testing.T) {
	srv := runServer(t, nil)
	js := createStream(t, srv.url(), false)
	l := &lookups{by: map[string]int{}}
	flush := func(p *publisher.Publisher) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	const batch = 10
	small := func(c *publisher.Config) { c.BatchSize = batch }
	st := openStore(t, false)
	p := newPublisher(t, connect(t, srv.url()), st, l.config, small)
	flush(p) // started on an empty outbox
	commit(t, st, entries(1, 20, 2))
	flush(p)
	if len(l.by) != 0 {
		t.Errorf("look-ups %v for entries committed after the start, want none", l.by)
	}
	commit(t, st, entries(100, 20, 2))
	flush(newPublisher(t, connect(t, srv.url()), st, l.config, small)) // a restart
	if l.get(publisher.LookupNotStored) > batch || l.get(publisher.LookupStored) != 0 {
		t.Errorf("look-ups %v after a restart for entries never sent, want at most a batch (%d), none found", l.by, batch)
	}
	l.by = map[string]int{}

	// The re-send below must come inside the window, however long the
	// steps above took on a loaded machine: the stream's window widened.
	if _, err := js.UpdateStream(context.Background(), jetstream.StreamConfig{
		Name: stream, Subjects: []string{"orders.>"}, Storage: jetstream.FileStorage, Duplicates: time.Hour,
	}); err != nil {
		t.Fatal(err)
	}
	again := openStore(t, false)
	commit(t, again, entries(1, 5, 1))
	if err := again.SaveRecord(publisher.PublisherRecord, map[string]uint64{"sent_through": 0}); err != nil {
		t.Fatal(err)
	}
	flush(newPublisher(t, connect(t, srv.url()), again, l.config))
	if d := l.dups.Load(); d != 5 || len(l.by) != 0 {
		t.Errorf("%d duplicate acks counted, look-ups %v: want 5 and none", d, l.by)
	}
	if n := len(readStream(t, js, stream)); n != 80 {
		t.Errorf("%d messages in the stream, want 80", n)
	}
}

// An entry acknowledged but not deleted, the next event of its order on
// the same subject sent and stored after it, then a crash and a restart
// later than the window: the last message on the subject is the later
// event, which proves the earlier one stored (it went out only after the
// earlier one's PubAck). Neither is sent again.
func TestSameSubjectSuccessorStoredBeforeCrash(t *testing.T) {
	srv := runServer(t, nil)
	createStream(t, srv.url(), false)
	st := &failingDeletes{Store: openStore(t, false)}
	want := []state.OutboxEntry{
		{ID: "update-1", Subject: "orders.updated.7", Payload: []byte(`{"n":1}`)},
		{ID: "update-2", Subject: "orders.updated.7", Payload: []byte(`{"n":2}`)},
	}
	commit(t, st.Store, want)
	st.fail.Store(true)
	first := newPublisher(t, connect(t, srv.url()), st)
	stop := startRun(t, first)
	_, js := plainConn(t, srv.url())
	ids := func() []string {
		var out []string
		for _, m := range readStream(t, js, stream) {
			out = append(out, m.MsgID)
		}
		return out
	}
	waitFor(t, 30*time.Second, "both events stored", func() bool { return len(ids()) == 2 })
	stop() // killed: both still in the outbox
	time.Sleep(window + time.Second)
	st.fail.Store(false)
	l := &lookups{by: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := newPublisher(t, connect(t, srv.url()), st.Store, l.config).Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(); len(got) != 2 || got[0] != "update-1" || got[1] != "update-2" || l.get(publisher.LookupStored) != 2 {
		t.Errorf("stream %v, look-ups %v: want [update-1 update-2], both found", got, l.by)
	}
}
