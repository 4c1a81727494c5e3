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
	// sweeps may use on average, 0 < share <= 1 [0.25]. When the sweeps
	// would use more, the interval stretches.
	CallShare float64
	// Throttle returns what the service last said of its limits.
	Throttle func() plenty.Throttle
	// OnSweep receives every sweep's figures and error (logs, metrics).
	OnSweep func(Stats, error)
}

// Run sweeps until ctx is done: one sweep, then a wait of the interval
// (stretched to stay within the call share), and so on. A failed sweep is
// reported and retried after the interval; it never ends Run.
func (p *Poller) Run(ctx context.Context, rc RunConfig) error {
	if rc.Interval <= 0 {
		rc.Interval = 30 * time.Second
	}
	if rc.CallShare <= 0 || rc.CallShare > 1 {
		rc.CallShare = 0.25
	}
	for {
		st, err := p.Sweep(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if rc.OnSweep != nil {
			rc.OnSweep(st, err)
		}
		var th plenty.Throttle
		if rc.Throttle != nil {
			th = rc.Throttle()
		}
		gap := NextGap(rc.Interval, rc.CallShare, st.Calls, th)
		wait := st.Start.Add(gap).Sub(p.cfg.Now())
		if wait > 0 {
			if err := p.cfg.Sleep(ctx, wait); err != nil {
				return nil
			}
		}
	}
}

// longPeriod is the length of the service's long throttling period (a day).
const longPeriod = 24 * time.Hour

// NextGap returns the time from one sweep's start to the next: the interval,
// or longer when calls made at this pace would spend more than share of the
// long-period quota, measured both against the limit (share x limit a day)
// and against what is left (share x calls left until the period resets).
func NextGap(interval time.Duration, share float64, calls int, th plenty.Throttle) time.Duration {
	long := th.Long
	if !long.Present || long.Limit <= 0 || calls <= 0 {
		return interval
	}
	rate := share * float64(long.Limit) / longPeriod.Seconds() // calls per second
	if long.Decay > 0 {
		rate = min(rate, share*float64(long.CallsLeft)/long.Decay.Seconds())
	}
	if rate <= 0 {
		return max(interval, long.Decay)
	}
	need := time.Duration(float64(calls) / rate * float64(time.Second))
	return max(interval, need)
}
