package poller

import (
	"context"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

// RunConfig paces the sweeps of Run.
type RunConfig struct {
	Interval time.Duration // between the starts of two sweeps [30s]
	// CallShare is the share of the service's long-period (daily) quota the
	// sweeps may use in the long run, 0 < share <= 1 [0.25]: see Budget.
	CallShare float64
	// Throttle returns what the service last said of its limits.
	Throttle func() plenty.Throttle
	// OnSweep receives every sweep's figures and error (logs, metrics);
	// Stats.NextGap and GapReason say when the next sweep starts and why
	// later than the interval.
	OnSweep func(Stats, error)
	// Budget is the call budget; default NewBudget(CallShare). A budget
	// restored from a previous process (Budget.Restore) holds the first
	// sweep back until the time that process would have started it.
	Budget *Budget
	// Calls returns the requests that have gone out to the service so far
	// (plenty.Client.Calls): each sweep charges the budget with what went
	// out during it, logins, refreshes and retries included. Nil charges the
	// sweep's own search calls (Stats.Calls).
	Calls func() int64
	// OnBudget receives the budget's state after every sweep, and after
	// the sweep a shutdown cut short (to persist it: record "budget").
	OnBudget func(BudgetState)
}

// Run sweeps until ctx is done: one sweep, then a wait of the interval
// (stretched when the call budget runs low), and so on. A failed sweep is
// reported and retried after the interval; it never ends Run.
func (p *Poller) Run(ctx context.Context, rc RunConfig) error {
	if rc.Interval <= 0 {
		rc.Interval = 30 * time.Second
	}
	if rc.Budget == nil {
		rc.Budget = NewBudget(rc.CallShare)
	}
	throttle := func() plenty.Throttle {
		if rc.Throttle == nil {
			return plenty.Throttle{}
		}
		return rc.Throttle()
	}
	if next := rc.Budget.NotBefore(); next.After(p.cfg.Now()) {
		// A previous process swept a moment ago: the budget binds this one
		// as it bound that one.
		p.log.Info("call budget: the first sweep waits for the time the previous process set", "next_sweep", next.Format(time.RFC3339))
		if err := p.cfg.Sleep(ctx, next.Sub(p.cfg.Now())); err != nil {
			return nil
		}
	}
	var seen int64 // requests counted before the sweep
	if rc.Calls != nil {
		seen = rc.Calls()
	}
	for {
		st, err := p.Sweep(ctx)
		st.Charged = st.Calls
		if rc.Calls != nil {
			n := rc.Calls()
			st.Charged, seen = int(n-seen), n
		}
		now := p.cfg.Now()
		rc.Budget.Spend(now, st.Charged, throttle())
		gap, why := rc.Budget.Gap(now, rc.Interval, throttle())
		rc.Budget.next, rc.Budget.gap = st.Start.Add(gap), gap
		if rc.OnBudget != nil {
			rc.OnBudget(rc.Budget.Snapshot())
		}
		if ctx.Err() != nil {
			return nil
		}
		st.NextGap, st.GapReason = gap, why
		st.BudgetLeft, st.BudgetKnown = rc.Budget.Remaining(now, throttle())
		if rc.OnSweep != nil {
			rc.OnSweep(st, err)
		}
		wait := st.Start.Add(gap).Sub(p.cfg.Now())
		if wait > 0 {
			if err := p.cfg.Sleep(ctx, wait); err != nil {
				return nil
			}
		}
	}
}
