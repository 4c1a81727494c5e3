package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/publisher"
)

// TestFlappingWithinOneSecondReachesTheStream: an order goes 5 -> 6, 6 -> 5,
// 5 -> 6 within one second of the service's clock, each state seen by a
// sweep (the simulator over HTTP, a real state file) and published through
// the outbox into a JetStream stream with its duplicate window (an
// in-process nats-server). All three transitions must be in the stream: id
// scheme 1 gave the third the first's id and JetStream dropped it. Relaxed
// for the test: a settle of 1ns (so that each sweep reads the current
// second) on the fake clock.
func TestFlappingWithinOneSecondReachesTheStream(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{Settle: time.Nanosecond, SubjectPrefix: "orders"})
	o := e.sim.AddOrder(plentysim.Order{StatusID: "5", CreatedAt: t0.Add(-time.Hour), UpdatedAt: t0.Add(-time.Hour)})

	ns := testnats.Start(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	pub, err := publisher.New(nc, e.store, publisher.Config{Stream: "ORDERS", CreateStream: true, SubjectPrefix: "orders", DuplicateWindow: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pub.EnsureStream(ctx); err != nil {
		t.Fatal(err)
	}

	e.clk.Advance(100 * time.Millisecond)
	e.sweep() // the baseline records the order at 5, silently
	var ids []string
	for _, status := range []string{"6", "5", "6"} {
		// All three in the second t0+1s, at .3, .6 and .9: the server clock
		// is estimated from Date headers (whole seconds), so each sweep's
		// hi lies in that second.
		e.clk.Advance(300 * time.Millisecond)
		if e.clk.Now().Before(t0.Add(time.Second)) {
			e.clk.Advance(t0.Add(1300 * time.Millisecond).Sub(e.clk.Now()))
		}
		changed, err := e.sim.SetStatus(o.ID, status)
		if err != nil {
			t.Fatal(err)
		}
		if !changed.UpdatedAt.Equal(t0.Add(time.Second)) {
			t.Fatalf("updatedAt %v, want every change in the second %v", changed.UpdatedAt, t0.Add(time.Second))
		}
		if st := e.sweep(); st.EventCount() != 1 {
			t.Fatalf("-> %s: %d events, want 1", status, st.EventCount())
		}
		for _, ev := range e.events() {
			ids = append(ids, ev.ID)
		}
		if err := pub.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 3 {
		t.Errorf("the stream holds %d of the 3 transitions (event ids %v): JetStream dropped one as a duplicate", info.State.Msgs, ids)
	}
}
