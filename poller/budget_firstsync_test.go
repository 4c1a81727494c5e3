package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// TestFirstSyncCutBySigtermsDoesNotPaceTheSweeps: a first sync cut by
// shutdowns, each process continuing from the state file (the budget
// record restored), charges the bucket with every call, but its sweeps
// are no measure of what a sweep costs: once the first sync is done, the
// one-call sweeps are paced at the refill (86.4 s at 0.25 of 4,000 a day),
// not at the cost of the cut first-sync sweeps.
func TestFirstSyncCutBySigtermsDoesNotPaceTheSweeps(t *testing.T) {
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: smallLimit}}, poller.Config{ItemsPerPage: 20})
	e.sim.Generate(1500, t0.Add(-20*24*time.Hour), t0.Add(-time.Minute))
	const perProcess = 20
	for proc := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		cfg := e.cfg
		start := e.client.Calls()
		cfg.OnProgress = func(poller.Progress) {
			if e.client.Calls()-start >= perProcess {
				cancel() // SIGTERM: the call in flight ends, the sweep commits and returns
			}
		}
		p, err := poller.New(e.client, e.store, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(ctx, poller.RunConfig{CallShare: 0.25, Throttle: e.client.Throttle, Calls: e.client.Calls, Records: e.store,
			OnSweep: func(st poller.Stats, err error) {
				t.Errorf("process %d: a sweep ended (%v): the first sync is too short for the test", proc, err)
			},
		}); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	// A record saved inside a first sync by a version that counted its
	// sweeps' costs: they are no measure of a sweep either.
	bs, found, err := poller.LoadBudget(e.store)
	if err != nil || !found {
		t.Fatalf("budget record: %v %v", found, err)
	}
	bs.Costs, bs.Mean, bs.Cycles = []int{perProcess, perProcess, perProcess}, perProcess, 3
	if err := e.store.SaveRecord(poller.BudgetRecord, bs); err != nil {
		t.Fatal(err)
	}
	// The next process completes the first sync and sweeps on.
	p, err := poller.New(e.client, e.store, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sweeps []poller.Stats
	if err := p.Run(ctx, poller.RunConfig{CallShare: 0.25, Throttle: e.client.Throttle, Calls: e.client.Calls, Records: e.store,
		OnSweep: func(st poller.Stats, err error) {
			if err != nil {
				t.Errorf("sweep: %v", err)
			}
			sweeps = append(sweeps, st)
			if len(sweeps) == 1 {
				// The sweep that completed the first sync is no cost in the record either.
				if bs, _, err := poller.LoadBudget(e.store); err != nil || len(bs.Costs) != 0 || bs.Mean != 0 {
					t.Errorf("after the first sync: the budget record's costs %v, mean %.1f (%v); want none", bs.Costs, bs.Mean, err)
				}
			}
			if len(sweeps) == 8 {
				cancel()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	if !sweeps[0].Baseline || sweeps[1].Baseline {
		t.Fatalf("sweep 0 baseline %v, sweep 1 baseline %v: want the first sync done by the first sweep", sweeps[0].Baseline, sweeps[1].Baseline)
	}
	refill := 86400 * time.Millisecond // one call at 0.25 x 4,000 a day
	for i, st := range sweeps[1:] {
		if st.Calls != 1 {
			continue
		}
		if st.Timings.Interval > 2*refill {
			t.Errorf("one-call sweep %d after the first sync: interval %v (%s); want about %v (the cost of a sweep, not of the first sync's)", i+1, st.Timings.Interval, st.Timings.IntervalSource, refill)
		}
	}
	t.Logf("first sync completed in %d calls; intervals after it: %v %v %v", sweeps[0].Calls, sweeps[1].Timings.Interval, sweeps[4].Timings.Interval, sweeps[7].Timings.Interval)
}
