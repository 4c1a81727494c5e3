package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// TestRunSplitsTheOverlapInABusyShop: at the defaults (derived pace,
// settle and overlap, a share of 0.25 of 166,000 calls a day) in a shop
// changing 20 orders a second, the overlap's 200 orders would make every
// sweep two pages; the sweeps read 5 s below the watermark instead and a
// second look reads what left the overlap once more. Every change is
// published, a commit that became visible 8 s late is found by the second
// look (not counted beyond the overlap), and the calls keep within the
// share.
func TestRunSplitsTheOverlapInABusyShop(t *testing.T) {
	t.Parallel()
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}}, poller.Config{})
	e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
	tm := poller.NewTimings(poller.TimingsConfig{Records: e.store})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const perSecond = 20
	added := map[int64]bool{}
	// The changes of the time up to the next sweep are added after each
	// sweep, stamped when they happen (a sweep takes no time on this clock):
	// each is visible before any sweep's window reaches its stamp.
	lastAdd := e.clk.Now()
	addChanges := func(until time.Time) {
		n := int(until.Sub(lastAdd).Seconds() * perSecond)
		for i := range n {
			at := lastAdd.Add(time.Duration(i+1) * until.Sub(lastAdd) / time.Duration(n))
			added[e.sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at}).ID] = true
		}
		if n > 0 {
			lastAdd = until
		}
	}
	var (
		sweeps   []poller.Stats
		late     int64
		lateAt   int // the sweep the late commit became visible after
		foundAt  = -1
		calls    int
		measured time.Time
	)
	const total = 160
	err := e.poll.Run(ctx, poller.RunConfig{
		CallShare: 0.25, Throttle: e.client.Throttle, Timings: tm,
		OnSweep: func(st poller.Stats, err error) {
			if err != nil {
				t.Errorf("sweep %d: %v", len(sweeps), err)
			}
			sweeps = append(sweeps, st)
			if testing.Verbose() && len(sweeps) > 1 {
				prev := sweeps[len(sweeps)-2]
				t.Logf("sweep %d at %v: lo wm-%v, hi-lo %v, pages %d, entries %d, charged %d, second look %v, probe %v, next gap %v %s, late %v",
					len(sweeps)-1, st.Start.Sub(t0), prev.Watermark.Sub(st.Lo), st.Hi.Sub(st.Lo), st.Pages, st.Entries, st.Charged, st.SecondLook, st.Probe, st.NextGap, st.GapReason, st.LateArrivals)
			}
			for _, d := range st.LateArrivals {
				if late != 0 && foundAt < 0 && d > 0 {
					foundAt = len(sweeps) - 1
				}
			}
			n := len(sweeps)
			switch {
			case n == 40:
				measured, calls = st.Start, 0
			case n == 80:
				// A commit stamped 8 s below the watermark becomes visible
				// only now: later than the sweeps' 5 s, within the overlap.
				at := st.Watermark.Add(-8 * time.Second)
				late, lateAt = e.sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at}).ID, n
				added[late] = true
			case n == total:
				cancel()
			}
			if n > 40 {
				calls += st.Charged
			}
			addChanges(st.Start.Add(st.NextGap))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	last := sweeps[len(sweeps)-1]
	// Every change has its event.
	published := map[int64]bool{}
	for _, ev := range e.events() {
		published[ev.Data.OrderID] = true
	}
	for id := range added {
		o, _ := e.sim.Order(id)
		if !published[id] && !last.Watermark.Before(o.UpdatedAt) {
			t.Errorf("order %d changed below the watermark and was not published", id)
		}
	}
	// The sweeps after the first minutes read 5 s below the watermark,
	// in one call each.
	split, pages, n := 0, 0, 0
	for i := 41; i < len(sweeps); i++ {
		st := sweeps[i]
		if st.Lo.Equal(sweeps[i-1].Watermark.Add(-5 * time.Second)) {
			split++
		}
		if !st.SecondLook && !st.Probe {
			pages += st.Pages
			n++
		}
	}
	if split < (len(sweeps)-41)*9/10 {
		t.Errorf("%d of %d sweeps read 5 s below the watermark; want nearly all (the overlap split off)", split, len(sweeps)-41)
	}
	if n == 0 || float64(pages)/float64(n) > 1.1 {
		t.Errorf("%d pages in %d sweeps without a second look; want one a sweep", pages, n)
	}
	// The late commit: found by a second look, not beyond the overlap.
	if foundAt < 0 || !sweeps[foundAt].SecondLook || last.Timings.BeyondOverlap != 0 {
		t.Errorf("the commit 8 s late (visible after sweep %d): found after sweep %d (second look: %v), beyond the overlap: %d; want found by a second look, none beyond",
			lateAt, foundAt, foundAt >= 0 && sweeps[foundAt].SecondLook, last.Timings.BeyondOverlap)
	}
	if !published[late] {
		t.Errorf("no event for the commit that became visible 8 s late")
	}
	// Within the share: 0.25 x 166,000 a day is 0.48 calls a second.
	span := last.Start.Sub(measured).Seconds()
	gap := span / float64(len(sweeps)-41)
	if rate := float64(calls) / span; rate > 0.25*dailyLimit/86400*1.05 || gap > 3 {
		t.Errorf("%d calls in %.0f s (%.3f a second, %.0f a day), a sweep every %.2f s; want at most the share (0.48 a second), a sweep within 3 s", calls, span, rate, rate*86400, gap)
	}
	t.Logf("%d sweeps, %d split, %.2f pages a sweep, a sweep every %.2f s, %d calls in %.0f s = %.0f a day; late commit found after sweep %d (visible after %d)",
		len(sweeps)-41, split, float64(pages)/float64(n), gap, calls, span, float64(calls)/span*86400, foundAt, lateAt)
}
