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
	// Budget is the call budget; default NewBudget(CallShare).
	Budget *Budget
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
	for {
		st, err := p.Sweep(ctx)
		if ctx.Err() != nil {
			return nil
		}
		now := p.cfg.Now()
		rc.Budget.Spend(now, st.Calls, throttle())
		gap, why := rc.Budget.Gap(now, rc.Interval, throttle())
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
