package main

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/plentysim"
)

// The stream (created by the operator with a duplicate window of 2 s; the
// watcher's own WATCHER_DUPLICATE_WINDOW stays at its default of 10 min)
// stores the watcher's events but every acknowledgement is lost. The
// watcher is killed (-9) with those events still in its outbox, NATS goes
// down for longer than the window, and the watcher comes back after it.
// The events it sends again after the window are looked up in the stream
// first: none is stored twice, none is lost.
func TestFaultLostAckOutageLongerThanWindow(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{})
	const window = 2 * time.Second
	streamConfig := func(noAck bool) {
		t.Helper()
		nc, err := nats.Connect(f.ns.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: jetstream.FileStorage, Duplicates: window, NoAck: noAck,
		}); err != nil {
			t.Fatal(err)
		}
	}
	streamConfig(true)
	f.start()
	f.mutate(20)
	waitFor(t, "events stored without an acknowledgement", 60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, n := f.stream(ctx)
		return n >= 100
	})
	f.kill()
	streamConfig(false) // acknowledgements work again after the outage
	f.ns.Shutdown()
	f.ns.WaitForShutdown()
	outage := scale(window+2*time.Second, 30*time.Second)
	time.Sleep(outage) // changes keep coming; the watcher is down too
	f.startNATS()      // same port, same store dir
	f.start()
	f.quiesce()
	n := f.check()
	_, m := get("http://" + f.addr + "/metrics")
	stored := metricValue(m, `orderwatch_publish_dedup_lookups_total{result="stored"}`)
	if stored == 0 {
		t.Error("no outbox entry was found in the stream before its re-send")
	}
	t.Logf("lost acknowledgements, kill -9, NATS outage of %v (window %v): %d events checked, 0 doubled; look-ups: %v stored, %v not stored, %v duplicates acknowledged",
		outage, window, n, stored, metricValue(m, `orderwatch_publish_dedup_lookups_total{result="not_stored"}`), metricValue(m, "orderwatch_publish_duplicates_total"))
}
