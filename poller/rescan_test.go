package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// TestRescanRewindsBetweenSweeps: a rescan requested during a sweep is
// applied by Run before the next sweep starts: that sweep reads from the
// requested time (less the overlap), and the request's applied is called
// once.
func TestRescanRewindsBetweenSweeps(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{})
	e.sim.Generate(50, t0.Add(-2*time.Hour), t0.Add(-time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	from := t0.Add(-3 * time.Hour)
	applied, sweeps := 0, 0
	var second poller.Stats
	err := e.poll.Run(ctx, poller.RunConfig{Interval: 10 * time.Second, OnSweep: func(st poller.Stats, err error) {
		if err != nil {
			t.Errorf("sweep: %v", err)
		}
		switch sweeps++; sweeps {
		case 1:
			e.poll.Rescan(from, func() { applied++ })
			if applied != 0 {
				t.Error("the rescan was applied before the sweep's end")
			}
		case 2:
			second = st
			cancel()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if applied != 1 || !second.Lo.Equal(from.Add(-e.cfg.Overlap)) {
		t.Errorf("applied %d times; the next sweep read from %v, want %v", applied, second.Lo, from.Add(-e.cfg.Overlap))
	}
}

// TestRunKeepsBudgetInRecords: with Records, Run saves the budget after
// every sweep (record "budget") and a later Run continues it: its first
// sweep waits for the time the previous one set.
func TestRunKeepsBudgetInRecords(t *testing.T) {
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: smallLimit}}, poller.Config{})
	e.sim.Generate(50, t0.Add(-2*time.Hour), t0.Add(-time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sweeps := 0
	run := poller.RunConfig{Interval: 30 * time.Second, Throttle: e.client.Throttle, Calls: e.client.Calls, Records: e.store}
	run.OnSweep = func(poller.Stats, error) {
		if sweeps++; sweeps == 3 {
			cancel()
		}
	}
	if err := e.poll.Run(ctx, run); err != nil {
		t.Fatal(err)
	}
	saved, found, err := poller.LoadBudget(e.store)
	if err != nil || !found || saved.Limit != smallLimit || saved.Next.IsZero() {
		t.Fatalf("record budget: %+v, found %v, %v", saved, found, err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	var first time.Time
	run.OnSweep = func(st poller.Stats, _ error) { first = st.Start; cancel2() }
	if err := e.poll.Run(ctx2, run); err != nil {
		t.Fatal(err)
	}
	if first.Before(saved.Next) {
		t.Errorf("the next Run swept at %v; the saved budget held it until %v", first, saved.Next)
	}
}
