package poller_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// churn runs sweeps while orders change (perSweep distinct orders, 2 s
// apart) and half the pages after the first of every scan see an order of
// the window change before they are read (plentysim's ChangeWhilePaging).
// It returns the search calls and the changes made.
func churn(t *testing.T, e *env, sweeps, perSweep int) (calls, changes int) {
	t.Helper()
	orders := e.sim.Orders()
	e.sim.SetFaults(plentysim.Faults{ChangeWhilePaging: 0.5})
	before := e.sim.Stats().SearchCalls
	next := 0
	for range sweeps {
		for range perSweep {
			o := orders[next%len(orders)]
			next++
			to := "5"
			if cur, _ := e.sim.Order(o.ID); cur.StatusID == "5" {
				to = "6"
			}
			if _, err := e.sim.SetStatus(o.ID, to); err != nil {
				t.Fatal(err)
			}
			changes++
		}
		e.clk.Advance(2 * time.Second)
		if _, err := e.poll.Sweep(context.Background()); err != nil {
			t.Logf("sweep: %v (the next one goes on)", err)
		}
	}
	return e.sim.Stats().SearchCalls - before, changes
}

// TestChurnCostsAPagePerFailure: under changes while paging (pages of 10,
// 6 changes a second, half the pages see a change between two reads), a
// scan that fails verification resumes after the last page it read for
// sure instead of reading the slice again from the start. The sweeps keep
// up at fewer calls than changes (a rescan from the start spent more), and
// every change is recorded once and right.
func TestChurnCostsAPagePerFailure(t *testing.T) {
	e := newEnv(t, plentysim.Config{MaxItemsPerPage: 10}, poller.Config{ItemsPerPage: 10, Overlap: 3 * time.Second, Settle: 2 * time.Second})
	e.sim.Generate(600, t0.Add(-3*24*time.Hour), t0.Add(-time.Hour))
	e.sweep()
	calls, changes := churn(t, e, 60, 12)
	perChange := float64(calls) / float64(changes)
	t.Logf("%d calls for %d changes: %.2f a change", calls, changes, perChange)
	if perChange >= 1 {
		t.Errorf("%d calls for %d changes (%.2f a change): a failed verification costs more than the page that showed it", calls, changes, perChange)
	}
	e.sim.SetFaults(plentysim.Faults{})
	e.quiesce()
	e.assertSnapshotMatches()
	checkEvents(t, e.sim, e.events())
}

// TestNoStallAfterRescans: after a burst of changes (300 in a minute the
// sweeps did not keep up with: a window of 30 pages of 10) the changes
// stop, but half the pages still see a change between two reads, each page
// taking 150 ms. The next sweep completes, verified past the last change,
// within two calls a page of its window: failed verifications do not
// multiply the reading (a rescan from the start read every slice several
// times and cut it smaller, again and again).
func TestNoStallAfterRescans(t *testing.T) {
	e := newEnv(t, plentysim.Config{MaxItemsPerPage: 10}, poller.Config{ItemsPerPage: 10, Overlap: 3 * time.Second, Settle: 2 * time.Second})
	e.sim.Generate(600, t0.Add(-3*24*time.Hour), t0.Add(-10*time.Second))
	e.sweep()
	for i, o := range e.sim.Orders()[:300] {
		if i%5 == 0 {
			e.clk.Advance(time.Second)
		}
		if _, err := e.sim.SetStatus(o.ID, "7"); err != nil {
			t.Fatal(err)
		}
	}
	last := e.clk.Now().Truncate(time.Second)
	e.clk.Advance(3 * time.Second) // past the settle
	e.sim.SetFaults(plentysim.Faults{ChangeWhilePaging: 0.5})
	e.sim.SetBeforeSearch(func(*http.Request, int) { e.clk.Advance(150 * time.Millisecond) })
	st, err := e.poll.Sweep(context.Background())
	pages := (300 + 9) / 10
	t.Logf("the sweep after the burst: %d calls for a window of %d pages, %d rescans, %v", st.Calls, pages, st.Rescans, st.Duration)
	if err != nil || st.Watermark.Before(last.Add(-2*time.Second)) {
		t.Errorf("the sweep after the burst: watermark %v, error %v; want verified up to the last change (%v less the settle)",
			st.Watermark.Format(time.RFC3339), err, last.Format(time.RFC3339))
	}
	if st.Calls > 2*pages {
		t.Errorf("the sweep after the burst made %d calls for %d pages (%d rescans): failed verifications multiply the reading", st.Calls, pages, st.Rescans)
	}
	e.sim.SetFaults(plentysim.Faults{})
	e.quiesce()
	e.assertSnapshotMatches()
	checkEvents(t, e.sim, e.events())
}
