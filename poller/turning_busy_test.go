package poller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// busySweep is what turningBusy notes of a sweep after the shop turned
// busy.
type busySweep struct {
	gap         time.Duration // since the sweep before
	look, probe bool
	left        float64 // the bucket after it
	charged     int
	owed        time.Duration
}

// turningBusy runs a shop at the defaults that is quiet (a change every
// 10 s) for 6 minutes and then busy (20 changes a second) for 2, from a
// full bucket or a drained one (level 0 when the shop turns busy, as
// TestFreshnessHostile's drained restart), and returns the busy sweeps.
func turningBusy(t *testing.T, drained bool) []busySweep {
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}}, poller.Config{})
	e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
	tm := poller.NewTimings(poller.TimingsConfig{Records: e.store})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	busy, end := t0.Add(6*time.Minute), t0.Add(8*time.Minute)
	b := poller.NewBudget(0.25)
	last := e.clk.Now()
	var out []busySweep
	var prev time.Time
	err := e.poll.Run(ctx, poller.RunConfig{
		CallShare: 0.25, Throttle: e.client.Throttle, Timings: tm, Calls: e.client.Calls, Budget: b,
		OnSweep: func(st poller.Stats, _ error) {
			rate := 0.1
			if !st.Start.Add(st.NextGap).Before(busy) {
				rate = 20
				if drained && st.Start.Before(busy) {
					s := b.Snapshot()
					s.Level, s.At = 0, e.clk.Now()
					b.Restore(s, e.clk.Now())
				}
			}
			last = addEvenly(e.sim, last, st.Start.Add(st.NextGap), rate)
			if !prev.IsZero() && st.Start.After(busy) {
				out = append(out, busySweep{charged: st.Charged, gap: st.Start.Sub(prev), look: st.SecondLook, probe: st.Probe, left: st.BudgetLeft, owed: st.ReadOwed})
			}
			prev = st.Start
			if st.Start.After(end) {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTurningBusyKeepsThePace: a quiet shop that turns busy at once (20
// changes a second, as TestFreshnessHostile's busy defaults do) at the
// defaults. While the density measured catches up, the sweeps read the
// whole overlap and overflow a page; before, three such sweeps in a row
// made two pages the median cost of a sweep and spaced the next ones
// 4.2-6.2 s apart (the p99 of the busy defaults measured from outside):
// the sweeps split once one window shows the density.
func TestTurningBusyKeepsThePace(t *testing.T) {
	t.Parallel()
	sw := turningBusy(t, false)
	gaps := make([]time.Duration, len(sw))
	for i, s := range sw {
		gaps[i] = s.gap
	}
	worst := slices.Max(gaps)
	t.Logf("%d sweeps in the busy minutes, the longest gap %v", len(gaps), worst)
	// One-page sweeps with a one-call second look every third: 1.33
	// calls a sweep at 0.48 a second, 2.8 s apart; a two-page median
	// is 4.2 s or more.
	if worst > 3500*time.Millisecond {
		t.Errorf("a sweep %v after the one before once the shop turned busy; want at most 3.5 s (gaps: %v)", worst, gaps)
	}
}

// TestLeanBudgetSweepsFirst: a shop that turns busy when its bucket is
// drained. While the budget is in debt the re-reads yield to the sweeps
// (scheduler.go, leanLookMax): the second look and the probe's slices
// take no call in the first minute but what the bucket refilled beyond
// the sweeps' pace, and the sweeps are spaced as one-page sweeps alone.
// Before, the probe read its stretch at once and the second look a page
// every fourth sweep, each a call the sweeps waited for.
func TestLeanBudgetSweepsFirst(t *testing.T) {
	t.Parallel()
	sw := turningBusy(t, true)
	var at, gap time.Duration
	extra, probes := 0, 0
	for _, s := range sw {
		if at += s.gap; at > time.Minute {
			break
		}
		extra += s.charged - 1
		gap = max(gap, s.gap)
		if s.probe {
			probes++
		}
	}
	t.Logf("the first minute in debt: %d calls besides the sweeps' one, %d probe slices, the longest gap %v", extra, probes, gap)
	if probes > 0 || extra > 2 {
		t.Errorf("the first minute with the budget in debt: %d probe slices and %d calls besides one a sweep; want no slice and at most 2", probes, extra)
	}
}
