package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// TestWidenedOverlapOwesBelowTheFloor: a busy shop at the defaults (the
// split on); a probe finds a change 5 minutes late, and the overlap widens
// to its ceiling, past the probes' age. The ledger's floor had moved over
// what the probe read at the probes' age only: the stamps just below it
// were never read at the new overlap's. A change stamped there that
// becomes visible 7 minutes late (within the overlap in force then: the
// promise, docs/how-it-works.md) has its event.
func TestWidenedOverlapOwesBelowTheFloor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}}, poller.Config{})
	e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
	// The last probe a minute ago: the next one starts 4 minutes in, and
	// reads what is owed at 5 minutes (little: the shop is busy from t0).
	if err := e.store.SaveRecord(poller.TimingsRecord, map[string]any{
		"version": 1, "settleMs": 1000, "overlapMs": 10000, "changed": t0.Add(-time.Hour),
		"probe": t0.Add(-time.Minute), "probeEveryMs": (5 * time.Minute).Milliseconds(),
	}); err != nil {
		t.Fatal(err)
	}
	var (
		first, late int64 // the change the probe finds; the one below the floor
		x           time.Time
		after       int
		maxOverlap  time.Duration
	)
	busyShop(t, e, 20, func(n int, st poller.Stats) bool {
		maxOverlap = max(maxOverlap, st.Timings.Overlap)
		switch {
		case first == 0 && e.clk.Now().After(t0.Add(time.Minute)):
			// Stamped 90 s before t0, visible now (2.5 minutes late):
			// below what the second look owes, in the probe's window.
			at := t0.Add(-90 * time.Second)
			first = e.sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at}).ID
		case x.IsZero() && st.Timings.Overlap >= 5*time.Minute:
			x = e.poll.LedgerFloor().Add(-10 * time.Second)
			t.Logf("the overlap widened to %v at %v: watermark %v, ledger %s", st.Timings.Overlap, e.clk.Now().Sub(t0), st.Watermark.Sub(t0), e.poll.LedgerString())
			if st.Watermark.Sub(x) >= st.Timings.Overlap-time.Minute {
				t.Fatalf("the floor %v lies below the widened overlap: the test does not reach the stretch", x.Sub(t0))
			}
		case !x.IsZero() && late == 0 && st.Watermark.Sub(x) >= 7*time.Minute:
			late = e.sim.AddOrder(plentysim.Order{CreatedAt: x, UpdatedAt: x}).ID
		case late != 0 && st.Watermark.Sub(x) > maxOverlap+time.Minute:
			after++
		}
		return after > 3 || e.clk.Now().After(t0.Add(30*time.Minute))
	})
	if first == 0 || len(e.eventsOf(first)) == 0 || late == 0 {
		t.Fatalf("the probe's change %d (events %d), the late change %d, overlap %v: the test did not run its course", first, len(e.eventsOf(first)), late, maxOverlap)
	}
	if len(e.eventsOf(late)) == 0 {
		t.Errorf("the change stamped %v, visible 7 minutes late under an overlap of %v, has no event (ledger %s)", x.Sub(t0), maxOverlap, e.poll.LedgerString())
	}
}

// busyShop drives a shop at rate changes a second on the fake clock
// through Run at the defaults; onSweep returns true to stop.
func busyShop(t *testing.T, e *env, rate float64, onSweep func(n int, st poller.Stats) bool) {
	t.Helper()
	tm := poller.NewTimings(poller.TimingsConfig{Records: e.store})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, last := 0, e.clk.Now()
	err := e.poll.Run(ctx, poller.RunConfig{
		CallShare: 0.25, Throttle: e.client.Throttle, Timings: tm, Calls: e.client.Calls,
		OnSweep: func(st poller.Stats, _ error) {
			n++
			last = addEvenly(e.sim, last, st.Start.Add(st.NextGap), rate)
			if onSweep(n, st) || n > 20000 {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// addEvenly adds the changes of (last, until] at rate a second, evenly
// spaced, each a new order; it returns where the next ones start.
func addEvenly(sim *plentysim.Server, last, until time.Time, rate float64) time.Time {
	n := int(until.Sub(last).Seconds() * rate)
	if n <= 0 {
		return last
	}
	for i := range n {
		at := last.Add(time.Duration(i+1) * until.Sub(last) / time.Duration(n))
		sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at})
	}
	return until
}
