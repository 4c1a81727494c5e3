package faults

import (
	"testing"
	"time"

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
	f.killWithAcksLost(window)
	f.ns.Shutdown()
	f.ns.WaitForShutdown()
	outage := scale(window+2*time.Second, 30*time.Second)
	time.Sleep(outage) // changes keep coming; the watcher is down too
	f.startNATS()      // same port, same store dir
	f.start()
	n, m := f.checkLookedUp()
	t.Logf("lost acknowledgements, kill -9, NATS outage of %v (window %v): %d events checked, 0 doubled; look-ups: %v stored, %v not stored, %v duplicates acknowledged",
		outage, window, n, metricValue(m, `orderwatch_publish_dedup_lookups_total{result="stored"}`),
		metricValue(m, `orderwatch_publish_dedup_lookups_total{result="not_stored"}`), metricValue(m, "orderwatch_publish_duplicates_total"))
}

// killWithAcksLost runs the watcher on an operator's stream with a short
// duplicate window whose acknowledgements are lost, under changes, until
// events are stored but unacknowledged, kills it (-9), and lets the stream
// acknowledge again. The changes start once the first sweep is done: a
// change stamped before its end (the baseline point) is part of the
// baseline, with no event (by design), and the check, which folds the
// stream over the orders' states before the watcher started, would miss
// it (it did under load: an order's only change, stamped in the second of
// the baseline point).
func (f *faultEnv) killWithAcksLost(window time.Duration) {
	f.t.Helper()
	f.operatorStream(window, true)
	f.start()
	waitReady(f.t, f.addr)
	f.mutate(20)
	f.waitStoredUnacked(100)
	f.kill()
	f.operatorStream(window, false)
}

// checkLookedUp quiesces and checks the invariants (check), and that an
// outbox entry was found in the stream before its re-send (the look-up
// past the duplicate window worked); it returns the events checked and
// the watcher's metrics.
func (f *faultEnv) checkLookedUp() (events int, metrics string) {
	f.t.Helper()
	f.quiesce()
	events = f.check()
	_, metrics = get("http://" + f.addr + "/metrics")
	if metricValue(metrics, `orderwatch_publish_dedup_lookups_total{result="stored"}`) == 0 {
		f.t.Error("no outbox entry was found in the stream before its re-send")
	}
	return events, metrics
}
