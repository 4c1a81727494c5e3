package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/plentysim"
)

// TestScopeOrdersLeaveAndReturn runs the real binary with the README's own
// scope, WATCHER_SCOPE=statusId=in:5,6, against the simulator over HTTP: an
// order moving 5 -> 7 leaves the scope and is published, 7 -> 8 (out of
// scope on both sides) is not, 8 -> 5 brings it back and is published with
// its true before; an order outside the scope produces nothing, until it
// enters (3 -> 6: discovered). With the filter sent to the service (before
// the fix) the first change already went unseen. Default limits and
// configuration, except the test's short interval, settle, overlap and
// client timeout.
func TestScopeOrdersLeaveAndReturn(t *testing.T) {
	// The fault suite's world (300 orders that do not change, the real
	// binary, an in-process NATS server), with the service's default limits.
	// Relaxed: WATCHER_CALL_SHARE=1, or the long-run budget stretches the
	// test's 300ms interval to seconds (the test would take twice as long).
	f := newFaultEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: 166000}},
		"WATCHER_SCOPE=statusId=in:5,6")
	past := time.Now().Add(-time.Hour)
	a := f.sim.AddOrder(plentysim.Order{StatusID: "5", CreatedAt: past, UpdatedAt: past})
	b := f.sim.AddOrder(plentysim.Order{StatusID: "3", CreatedAt: past, UpdatedAt: past})
	c := f.sim.AddOrder(plentysim.Order{StatusID: "6", CreatedAt: past, UpdatedAt: past})
	f.start()
	defer func() {
		if t.Failed() {
			f.mu.Lock()
			t.Logf("watcher log:\n%s", tail(f.logs.String(), 8000))
			f.mu.Unlock()
		}
	}()
	waitReady(t, f.addr)
	base := "http://" + f.addr

	nc, err := nats.Connect(f.ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "ORDERS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	next := func(want string) {
		t.Helper()
		msg, err := cons.Next(jetstream.FetchMaxWait(20 * time.Second))
		if err != nil {
			t.Fatalf("waiting for %s (have %v): %v", want, got, err)
		}
		got = append(got, msg.Subject())
		if msg.Subject() != want {
			t.Fatalf("event on %s, want %s (have %v)", msg.Subject(), want, got)
		}
	}
	later := func() { time.Sleep(1100 * time.Millisecond) } // the next change in a later second

	f.sim.SetStatus(b.ID, "4") // out of scope on both sides: nothing
	later()
	f.sim.SetStatus(a.ID, "7") // leaves the scope
	next(fmt.Sprintf("orders.status_changed.5.7.%d", a.ID))
	eight, _ := f.sim.SetStatus(a.ID, "8") // out -> out: tracked silently
	waitFor(t, "the watermark past 7 -> 8", 20*time.Second, func() bool {
		_, m := get(base + "/metrics")
		return !time.Unix(int64(metricValue(m, "orderwatch_watermark_timestamp_seconds")), 0).Before(eight.UpdatedAt)
	})
	later()
	f.sim.SetStatus(a.ID, "5") // comes back, from 8
	next(fmt.Sprintf("orders.status_changed.8.5.%d", a.ID))
	f.sim.SetStatus(c.ID, "5") // in -> in
	next(fmt.Sprintf("orders.status_changed.6.5.%d", c.ID))
	f.sim.SetStatus(b.ID, "6") // enters the scope: first sight in scope
	next(fmt.Sprintf("orders.discovered.%d", b.ID))

	// Nothing else: the outbox is empty and the stream holds exactly these.
	waitFor(t, "an empty outbox", 10*time.Second, func() bool {
		_, m := get(base + "/metrics")
		return strings.Contains(m, "orderwatch_outbox_depth 0")
	})
	if _, n := f.stream(ctx); n != len(got) {
		t.Errorf("the stream holds %d events, want %d: %v", n, len(got), got)
	}
	if slices.ContainsFunc(got, func(s string) bool { return strings.HasSuffix(s, fmt.Sprintf(".4.%d", b.ID)) }) {
		t.Errorf("an out-of-scope change was published: %v", got)
	}
}
