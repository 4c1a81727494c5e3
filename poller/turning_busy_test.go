package poller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// TestTurningBusyKeepsThePace: a quiet shop that turns busy at once (20
// changes a second, as TestFreshnessHostile's busy defaults do) at the
// defaults. While the density measured catches up, the sweeps read the
// whole overlap and overflow a page; before, three such sweeps in a row
// made two pages the median cost of a sweep and spaced the next ones
// 4.5 s apart (the p99 of the busy defaults measured from outside): the
// sweeps split once one window shows the density, and what the sweeps
// cost before the split is no measure of what they cost after it.
func TestTurningBusyKeepsThePace(t *testing.T) {
	{
		e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}}, poller.Config{})
		e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
		tm := poller.NewTimings(poller.TimingsConfig{Records: e.store})
		ctx, cancel := context.WithCancel(context.Background())
		busy, end := t0.Add(10*time.Minute), t0.Add(14*time.Minute)
		last := e.clk.Now()
		var gaps []time.Duration
		var prev time.Time
		err := e.poll.Run(ctx, poller.RunConfig{
			CallShare: 0.25, Throttle: e.client.Throttle, Timings: tm, Calls: e.client.Calls,
			OnSweep: func(st poller.Stats, _ error) {
				rate := 0.1
				if !st.Start.Add(st.NextGap).Before(busy) {
					rate = 20
				}
				last = addEvenly(e.sim, last, st.Start.Add(st.NextGap), rate)
				if !prev.IsZero() && st.Start.After(busy) {
					gaps = append(gaps, st.Start.Sub(prev))
				}
				prev = st.Start
				if st.Start.After(end) {
					cancel()
				}
			},
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		// One-page sweeps with a one-call second look every third: 1.33
		// calls a sweep at 0.48 a second, 2.8 s apart; a two-page median
		// is 4.2 s or more.
		worst := slices.Max(gaps)
		t.Logf("%d sweeps in the busy minutes, the longest gap %v", len(gaps), worst)
		if worst > 3500*time.Millisecond {
			t.Errorf("a sweep %v after the one before once the shop turned busy; want at most 3.5 s (gaps: %v)", worst, gaps)
		}
	}
}
