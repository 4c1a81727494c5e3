package poller_test

import (
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// TestRestartInsideABulkSecondGoesOn: 1,200 orders change in one second
// (24 pages of 50, read by keyset 8 pages a sweep); the process restarts
// after the first sweep. The next process goes on from the saved cursor
// instead of reading the second from its first order again, and every
// change has exactly one event.
func TestRestartInsideABulkSecondGoesOn(t *testing.T) {
	e := newEnv(t, plentysim.Config{MaxItemsPerPage: 50}, poller.Config{ItemsPerPage: 50, SlicePages: 2, Keyset: poller.KeysetOn, KeysetPages: 8})
	e.sim.Generate(1300, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
	e.sweep()
	e.clk.Advance(time.Minute)
	changed := map[int64]bool{}
	for _, o := range e.sim.Orders()[:1200] {
		if !order.MustDecimal(o.StatusID).Equal(order.MustDecimal("8")) {
			changed[o.ID] = true
		}
		e.sim.SetStatus(o.ID, "8")
	}
	e.clk.Advance(10 * time.Second)
	st := e.sweep()
	if st.Held.IsZero() {
		t.Fatal("the bulk second was read in one sweep: the test does not restart inside it")
	}
	calls := 0
	for sweeps := 0; ; sweeps++ {
		e.restart() // a new process inside the bulk second
		e.clk.Advance(time.Second)
		st = e.sweep()
		calls += st.Calls
		t.Logf("sweep after restart %d: %d calls, %d keyset slices, held %v", sweeps+1, st.Calls, st.KeysetSlices, !st.Held.IsZero())
		if st.Held.IsZero() {
			break
		}
		if sweeps > 5 {
			t.Fatalf("the bulk second is still held after %d restarts", sweeps)
		}
	}
	// 16 pages are left after the first sweep's 8: two sweeps of 8, each
	// with the calls a new process makes to find the bulk second (the
	// service's clock, the window cut down to the second: about 10).
	// Read from its start again, the second is never done (8 of 24 pages a
	// process).
	if calls > 2*(8+12) {
		t.Errorf("%d calls after the restarts for the 16 pages left of the bulk second: read again from its start", calls)
	}
	count := map[int64]int{}
	for _, ev := range e.events() {
		count[ev.Data.OrderID]++
	}
	for id := range changed {
		if count[id] != 1 {
			t.Errorf("order %d has %d events; want one", id, count[id])
		}
	}
	t.Logf("%d calls after the first sweep, %d changes", calls, len(changed))
	e.assertSnapshotMatches()
}
