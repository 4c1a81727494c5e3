package poller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// budgetSaves is the state file as a process killed at any moment leaves
// it: every budget record saved, with the calls the client had sent then;
// once killed, nothing more is saved.
type budgetSaves struct {
	poller.Records
	calls  func() int64
	mu     sync.Mutex
	saves  []budgetSave
	killed bool
}

type budgetSave struct {
	calls int64
	state poller.BudgetState
}

func (b *budgetSaves) SaveRecord(name string, v any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.killed {
		return nil
	}
	if s, ok := v.(poller.BudgetState); ok && name == poller.BudgetRecord {
		b.saves = append(b.saves, budgetSave{b.calls(), s})
	}
	return b.Records.SaveRecord(name, v)
}

func (b *budgetSaves) kill() { b.mu.Lock(); b.killed = true; b.mu.Unlock() }

// TestBudgetChargedAsTheSweepGoes: a long sweep (a first sync) charges the
// budget and saves it as its calls go out, at most saveEvery (5) calls
// apart, so that a process killed inside it leaves what it spent.
func TestBudgetChargedAsTheSweepGoes(t *testing.T) {
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: smallLimit}}, poller.Config{ItemsPerPage: 20})
	e.sim.Generate(1500, t0.Add(-20*24*time.Hour), t0.Add(-time.Minute))
	rec := &budgetSaves{Records: e.store, calls: e.client.Calls}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sweepCalls int64
	if err := e.poll.Run(ctx, poller.RunConfig{CallShare: 0.25, Throttle: e.client.Throttle, Calls: e.client.Calls, Records: rec,
		OnSweep: func(poller.Stats, error) { sweepCalls = e.client.Calls(); rec.kill(); cancel() },
	}); err != nil {
		t.Fatal(err)
	}
	if sweepCalls < 50 {
		t.Fatalf("the first sweep made %d calls; the test needs a long one", sweepCalls)
	}
	capacity := 0.25 * smallLimit / 24.0
	var last int64
	for _, s := range rec.saves {
		if s.calls-last > 10 {
			t.Errorf("saves at %d and %d calls: a kill between them loses %d calls", last, s.calls, s.calls-last)
		}
		if want := capacity - float64(s.calls) + 1; s.state.Level > want {
			t.Errorf("saved at %d calls with level %.1f, want at most %.1f (every call charged)", s.calls, s.state.Level, want)
		}
		last = s.calls
	}
	if sweepCalls-last > 10 {
		t.Errorf("the last save of the sweep at %d of its %d calls", last, sweepCalls)
	}
	t.Logf("first sweep: %d calls, %d saves of the budget", sweepCalls, len(rec.saves))
}

// TestBudgetStartsEmptyAfterAnUnsavedKill: a state file that shows earlier
// work (a baseline, a watermark) but holds no budget record was left by a
// process killed before its first save: the budget starts empty.
func TestBudgetStartsEmptyAfterAnUnsavedKill(t *testing.T) {
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: smallLimit}}, poller.Config{})
	e.sim.Generate(20, t0.Add(-2*time.Hour), t0.Add(-time.Minute))
	if err := e.store.SetBaseline(t0.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var charged int
	if err := e.poll.Run(ctx, poller.RunConfig{CallShare: 0.25, Throttle: e.client.Throttle, Calls: e.client.Calls, Records: e.store,
		OnSweep: func(st poller.Stats, _ error) { charged = st.Charged; cancel() },
	}); err != nil {
		t.Fatal(err)
	}
	bs, found, err := poller.LoadBudget(e.store)
	if err != nil || !found {
		t.Fatalf("budget record: %v %v", found, err)
	}
	if bs.Level > 0 {
		t.Errorf("after a sweep of %d calls the budget is at %.1f: it started full (41.7), want empty", charged, bs.Level)
	}
}

// TestRestoredBudgetClamped: a damaged budget record (a level of -1e9,
// costs of 1e9) cannot stop the sweeps for good: the level is within a
// day's share of debt, the gap within a day; a record with an impossible
// limit restores nothing.
func TestRestoredBudgetClamped(t *testing.T) {
	now := t0
	th := longOnly(smallLimit, smallLimit, time.Hour)
	b := poller.NewBudget(0.25)
	b.Restore(poller.BudgetState{Level: -1e9, At: now, Limit: smallLimit, Costs: []int{1e9, 1e9, 1e9, 1e9, 1e9}}, now)
	if level, _ := b.Remaining(now, th); level < -0.25*smallLimit {
		t.Errorf("restored level %.0f, want at least a day's share of debt (-1000)", level)
	}
	if gap, why := b.Gap(now, 0, th); gap <= 0 || gap > 24*time.Hour {
		t.Errorf("gap after a damaged record: %v (%s), want within a day", gap, why)
	}
	b = poller.NewBudget(0.25)
	b.Restore(poller.BudgetState{Level: 1e9, At: now, Limit: 1 << 40}, now)
	if _, known := b.Remaining(now, plenty.Throttle{}); known {
		t.Error("a record with a limit of 2^40 calls a day was restored")
	}
}

// TestSteadySweepSavesTheBudgetOnce: a sweep of a few calls (fewer than
// the five a kill may lose, within a second: the steady state) saves the
// budget once, at its end, not also at its first call: each save is a
// write of the state file and of the group's limits (package replica).
func TestSteadySweepSavesTheBudgetOnce(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{})
	e.sim.Generate(30, t0.Add(-2*24*time.Hour), t0.Add(-time.Minute))
	rec := &budgetSaves{Records: e.store, calls: e.client.Calls}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sweeps, checked, last := 0, 0, 0
	err := e.poll.Run(ctx, poller.RunConfig{CallShare: 0.25, Throttle: e.client.Throttle, Calls: e.client.Calls, Records: rec,
		OnSweep: func(st poller.Stats, err error) {
			rec.mu.Lock()
			n := len(rec.saves)
			rec.mu.Unlock()
			if sweeps++; sweeps > 1 && err == nil && st.Charged > 0 && st.Charged < 5 {
				checked++
				if n-last != 1 {
					t.Errorf("sweep %d (%d calls) saved the budget %d times; want once", sweeps, st.Charged, n-last)
				}
			}
			last = n
			if sweeps == 8 {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 5 {
		t.Fatalf("%d steady sweeps checked; the test needs at least 5", checked)
	}
}

// TestYieldHoldsEverySweepButTheFirst: Config.Yield (a fleet member's
// takeovers going first) is asked before every sweep that follows
// another, once its wait is over, never before the first (a shop's first
// sweep after its takeover is not held).
func TestYieldHoldsEverySweepButTheFirst(t *testing.T) {
	var yields, sweeps int
	e := newEnv(t, plentysim.Config{}, poller.Config{Yield: func(context.Context) { yields++ }})
	e.sim.Generate(10, t0.Add(-2*24*time.Hour), t0.Add(-time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := e.poll.Run(ctx, poller.RunConfig{CallShare: 0.25, Throttle: e.client.Throttle, Calls: e.client.Calls,
		OnSweep: func(poller.Stats, error) {
			if sweeps++; yields != sweeps-1 {
				t.Errorf("sweep %d ran after %d yields; want %d (one before each sweep but the first)", sweeps, yields, sweeps-1)
			}
			if sweeps == 4 {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sweeps != 4 {
		t.Fatalf("%d sweeps", sweeps)
	}
}
