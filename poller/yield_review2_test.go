package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// heldRun runs a poller on a shop of 10 orders until span of its clock
// passed, its sweeps held by Config.Yield for hold each (0: none); it
// returns each sweep's stats.
func heldRun(t *testing.T, hold time.Duration, span time.Duration) []poller.Stats {
	t.Helper()
	var e *env
	yield := func(ctx context.Context) {
		if hold > 0 {
			_ = e.clk.Sleep(ctx, hold)
		}
	}
	e = newEnv(t, plentysim.Config{}, poller.Config{Yield: yield})
	e.sim.Generate(10, t0.Add(-2*24*time.Hour), t0.Add(-time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out []poller.Stats
	err := e.poll.Run(ctx, poller.RunConfig{Interval: 10 * time.Second, CallShare: 0.25, Throttle: e.client.Throttle, Calls: e.client.Calls,
		OnSweep: func(st poller.Stats, _ error) {
			out = append(out, st)
			if e.clk.Now().Sub(t0) >= span {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAHeldSweepIsNeitherChargedNorPacedFaster: sweeps held by the
// process's takeovers (Config.Yield, 3 s each here) are charged their
// calls only, each starts no sooner than its gap (and the hold) after the
// one before, and in the same time they make no more calls than sweeps
// never held.
func TestAHeldSweepIsNeitherChargedNorPacedFaster(t *testing.T) {
	const hold, span = 3 * time.Second, 5 * time.Minute
	held, free := heldRun(t, hold, span), heldRun(t, 0, span)
	calls := func(sts []poller.Stats) (n int) {
		for _, st := range sts {
			n += st.Calls
		}
		return n
	}
	for i, st := range held[1:] { // the first sweep is not held (its login is charged too)
		i++
		if st.Charged != st.Calls {
			t.Errorf("held sweep %d charged %d calls, made %d", i+1, st.Charged, st.Calls)
		}
		if st.Start.Before(held[i-1].Start.Add(held[i-1].NextGap + hold)) {
			t.Errorf("held sweep %d began %v after the one before, whose gap was %v (and the hold %v)",
				i+1, st.Start.Sub(held[i-1].Start), held[i-1].NextGap, hold)
		}
	}
	if calls(held) > calls(free) || len(held) > len(free) {
		t.Errorf("in %v: %d calls in %d sweeps held, %d in %d never held", span, calls(held), len(held), calls(free), len(free))
	}
	t.Logf("in %v: %d calls in %d sweeps held, %d in %d never held", span, calls(held), len(held), calls(free), len(free))
}
