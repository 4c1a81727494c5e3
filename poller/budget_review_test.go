package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// TestProcessesKilledAfterTheirFirstCallAreChargedAndPaced: a crash loop
// on one state file (a process that dies on what its first call
// returned, kill -9 before its sweep ends, a restart), six times after a steady first
// process. Every process's first call is charged and saved with the next
// sweep's time, as the budget's promise across restarts asks ("a new
// process is bound as the old one was", docs/how-it-works.md): the
// processes together lose at most a few calls (saveEvery) and their
// calls are an interval apart. A process that saves only after a few
// calls or at its sweep's end leaves nothing: each restart sweeps at once
// and none of the loop's calls is ever charged.
func TestProcessesKilledAfterTheirFirstCallAreChargedAndPaced(t *testing.T) {
	const interval = 30 * time.Second
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: smallLimit}}, poller.Config{})
	e.sim.Generate(20, t0.Add(-2*time.Hour), t0.Add(-time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	sweeps := 0
	if err := e.poll.Run(ctx, poller.RunConfig{CallShare: 0.25, Interval: interval, Throttle: e.client.Throttle, Calls: e.client.Calls, Records: e.store,
		OnSweep: func(poller.Stats, error) {
			if sweeps++; sweeps == 3 {
				cancel()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	cancel()
	counted := func() (n int64) {
		s, _, err := poller.LoadBudget(e.store)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range s.Spent {
			n += sp.Calls
		}
		return n
	}
	var firstCalls []time.Time
	for i := range 6 {
		before := counted()
		e.restart()
		rec := &budgetSaves{Records: e.store, calls: e.client.Calls}
		ctx, cancel := context.WithCancel(context.Background())
		// Killed at the first count of the calls after the one that saw
		// the first call (onCall's): after what onCall saved, before the
		// sweep's end (charged, finish).
		called, made := false, int64(0)
		calls := func() int64 {
			n := e.client.Calls()
			switch {
			case n == 0 || ctx.Err() != nil:
			case !called:
				called = true
				firstCalls = append(firstCalls, e.clk.Now())
			default:
				rec.kill() // nothing it saves from now on is in the file
				cancel()
				made = n
			}
			return n
		}
		if err := e.poll.Run(ctx, poller.RunConfig{CallShare: 0.25, Interval: interval, Throttle: e.client.Throttle, Calls: calls, Records: rec}); err != nil {
			t.Fatal(err)
		}
		cancel()
		if made == 0 {
			t.Fatalf("process %d was not killed after a call", i+2)
		}
		if n := counted() - before; n < 1 || made-n >= 5 {
			t.Errorf("process %d made %d calls before its kill, %d of them charged in the state file: want its first and all but 4 at most", i+2, made, n)
		}
	}
	for i := 1; i < len(firstCalls); i++ {
		if d := firstCalls[i].Sub(firstCalls[i-1]); d < interval {
			t.Errorf("process %d called %v after the one before it was killed after its call: the interval is %v", i+2, d, interval)
		}
	}
}

// TestAKillInsideASteadySweepLosesItsCallOnly: a process killed after the
// call of a steady sweep (one call), before the sweep's end, leaves the
// budget as the sweep before it saved it: the restart misses that call
// (fewer than saveEvery, 5) and is held only until the killed sweep's
// start (its next sweep's time was not saved yet). Before the budget was
// saved once per steady sweep, the sweep's first call saved it: nothing
// lost and the restart held a gap after the killed sweep's start.
func TestAKillInsideASteadySweepLosesItsCallOnly(t *testing.T) {
	const interval = 30 * time.Second
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: smallLimit}}, poller.Config{})
	e.sim.Generate(20, t0.Add(-2*time.Hour), t0.Add(-time.Minute))
	rec := &budgetSaves{Records: e.store, calls: e.client.Calls}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sweeps, base, called := 0, int64(-1), false
	var made int64
	var callAt time.Time
	calls := func() int64 {
		n := e.client.Calls()
		switch {
		case base < 0 || ctx.Err() != nil:
		case !called && n > base:
			called, callAt = true, e.clk.Now()
		case called:
			rec.kill()
			cancel()
			made = n
		}
		return n
	}
	if err := e.poll.Run(ctx, poller.RunConfig{CallShare: 0.25, Interval: interval, Throttle: e.client.Throttle, Calls: calls, Records: rec,
		OnSweep: func(poller.Stats, error) {
			if sweeps++; sweeps == 3 {
				base = e.client.Calls()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	if made == 0 {
		t.Fatal("the process was not killed inside its fourth sweep")
	}
	saved, _, err := poller.LoadBudget(e.store)
	if err != nil {
		t.Fatal(err)
	}
	var counted int64
	for _, sp := range saved.Spent {
		counted += sp.Calls
	}
	lost := made - counted
	if lost < 0 || lost >= 5 {
		t.Errorf("killed after %d calls, %d of them charged in the state file: %d lost, want fewer than saveEvery (5)", made, counted, lost)
	}
	t.Logf("killed inside a steady sweep: %d of %d calls lost; the restart is held until %v after the killed sweep's call (the interval is %v)",
		lost, made, saved.Next.Sub(callAt), interval)
}
