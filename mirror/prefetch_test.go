package mirror_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
)

// apiRequests counts the JetStream API requests made on the server from
// now on (a subscriber of $JS.API.> receives a copy of each), by kind.
type apiRequests struct {
	mu  sync.Mutex
	all []string
}

func countRequests(t *testing.T, r *replica) *apiRequests {
	t.Helper()
	c := &apiRequests{}
	sub, err := r.nc.Subscribe("$JS.API.>", func(m *nats.Msg) {
		c.mu.Lock()
		c.all = append(c.all, m.Subject)
		c.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return c
}

func (c *apiRequests) seen(r *replica) []string {
	_ = r.nc.Flush()
	time.Sleep(50 * time.Millisecond) // the copies of the last requests
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.all...)
}

func count(subjects []string, kind string) int {
	n := 0
	for _, s := range subjects {
		if strings.Contains(s, kind) {
			n++
		}
	}
	return n
}

// A takeover is a few requests (issue 34: on a loaded machine each costs
// hundreds of milliseconds and a killed member's shops waited for about
// ten in a row): its reads are made at once, a dump of one chunk is one
// direct get, and a few events after the dump are read by direct gets,
// without creating a consumer; with more events than that, an ordered
// consumer reads them as before. Either way the successor has the
// active's state.
func TestTakeoverInFewRequests(t *testing.T) {
	for _, events := range []int{3, 20} {
		t.Run(map[int]string{3: "a few events after the dump", 20: "many events after the dump"}[events], func(t *testing.T) {
			s, a := group(t)
			last := orderState("5", t0)
			for i := range events {
				next := orderState([]string{"6", "7"}[i%2], t0.Add(time.Duration(i+1)*time.Minute))
				change(t, a, 7, last, next, true)
				last = next
			}
			b, got := takeOverCounting(t, s, a)
			if st := lookup(t, b.store, 7); st == nil || !st.Same(last) {
				t.Errorf("b's order 7 = %+v; want the state of the last of the %d events", st, events)
			}
			if st := lookup(t, b.store, 50); st == nil || !st.Same(orderState("5", t0)) {
				t.Errorf("b's order 50 = %+v; want the dump's", st)
			}
			consumers, gets := count(got, ".CONSUMER.CREATE."), count(got, ".MSG.GET.ORDERS")
			if events <= 8 && (consumers != 0 || len(got) > 6+events) {
				t.Errorf("the takeover made %d requests, %d of them creating a consumer; want at most %d and none: %q", len(got), consumers, 6+events, got)
			}
			if events > 8 && (consumers == 0 || gets > 8) {
				t.Errorf("the takeover created %d consumers and read %d events by direct gets; want the 8 first read so and a consumer for the rest: %q", consumers, gets, got)
			}
		})
	}
}

// A standby follows the stream by asking for the next event (a direct
// get) every 200 ms, not by fetching from an ordered consumer, which
// nats.go creates anew for every fetch: about 15 requests a second per
// standby before, with a consumer created and one deleted on the server
// each time (a takeover burst of transient standbys in a fleet).
func TestStandbyFollowsWithoutConsumers(t *testing.T) {
	s, a := group(t)
	b := following(t, s)
	last := orderState("5", t0)
	follow := func() {
		for i := range 3 {
			next := orderState([]string{"6", "7"}[i%2], last.UpdatedAt.Add(time.Minute))
			change(t, a, 7, last, next, true)
			last = next
		}
		waitFor(t, "b to mirror the events", 10*time.Second, func() bool {
			st := lookup(t, b.store, 7)
			return st != nil && st.Same(last)
		})
	}
	follow() // the dump loaded, the first events read
	reqs := countRequests(t, b)
	start := time.Now()
	follow()
	time.Sleep(2 * time.Second)
	got := reqs.seen(b)
	secs := time.Since(start).Seconds()
	if n := count(got, ".CONSUMER.CREATE.ORDERS"); n != 0 {
		t.Errorf("the standby created %d consumers in %.1f s of following; want none: %q", n, secs, got)
	}
	mirror := len(got) - count(got, "KV_t_lease") // the two leases' renewals and reads
	if rate := float64(mirror) / secs; rate > 10 {
		t.Errorf("the standby made %.1f requests a second while following; want at most 10 (5 polls, the events, a checkpoint, a dump and a stream look): %q", rate, got)
	}
}

// A stream created with allow_direct (by an operator: orderwatch does not
// set it) may have a direct get answered by a replica that lags behind its
// leader, "not found" for the newest events: such a stream is read by the
// ordered consumer, which the leader serves, and never by direct gets.
func TestAllowDirectStreamIsReadByTheConsumer(t *testing.T) {
	s := testnats.StartAny(t)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	a := newReplica(t, s, "a")
	firstActive(t, a)
	last := orderState("6", t0.Add(time.Minute))
	change(t, a, 7, orderState("5", t0), last, true)
	b, got := takeOverCounting(t, s, a)
	if st := lookup(t, b.store, 7); st == nil || !st.Same(last) {
		t.Errorf("b's order 7 = %+v; want the event's state", st)
	}
	if n := count(got, "GET.ORDERS"); n != 0 || count(got, ".CONSUMER.CREATE.ORDERS") == 0 {
		t.Errorf("the takeover read the allow_direct stream by %d gets; want none, a consumer: %q", n, got)
	}
}

// following is a new replica b of the group on server s, a standby whose
// mirror runs until the test ends.
func following(t *testing.T, s testnats.Server) *replica {
	t.Helper()
	b := newReplica(t, s, "b")
	if err := b.m.Demoted(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.m.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	return b
}

// takeOverCounting checkpoints the active a and kills it; a new replica
// b takes over on a new state file. got are the JetStream API requests
// made on the server during b's takeover.
func takeOverCounting(t *testing.T, s testnats.Server, a *replica) (b *replica, got []string) {
	t.Helper()
	ctx := context.Background()
	if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok {
		t.Fatalf("Committed: %v %v", ok, err)
	}
	die(a)
	b = newReplica(t, s, "b")
	waitFor(t, "b to hold the lease", 10*time.Second, b.lease.Active)
	reqs := countRequests(t, b)
	if restored, err := b.m.Takeover(ctx, b.lease, true); err != nil || !restored {
		t.Fatalf("b's takeover: restored %v, %v", restored, err)
	}
	return b, reqs.seen(b)
}
