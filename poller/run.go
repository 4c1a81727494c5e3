package poller

import (
	"context"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

// RunConfig paces the sweeps of Run.
type RunConfig struct {
	// Interval between the starts of two sweeps, explicit: the gap is never
	// shorter. 0 derives it from the call budget and the measured cost of
	// a sweep (Budget.Pace: 2.08 s for a one-call sweep at 0.25 of
	// 166,000 calls a day).
	Interval time.Duration
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
	// the sweep a shutdown cut short.
	OnBudget func(BudgetState)
	// Records, when set, keeps the budget across restarts (record
	// "budget", records.go): a Run without a Budget continues the saved
	// one, and every state OnBudget receives is saved first.
	Records Records
	// Timings sets the settle and overlap of every sweep (the Config's
	// values are replaced before each one) from the measured late
	// arrivals; nil: the Config's values stay.
	Timings *Timings
}

// Run sweeps until ctx is done: one sweep, then a wait of the interval
// (stretched when the call budget runs low), and so on. A failed sweep is
// reported and retried after the interval; it never ends Run.
func (p *Poller) Run(ctx context.Context, rc RunConfig) error {
	if rc.Budget == nil {
		rc.Budget = NewBudget(rc.CallShare)
		p.restoreBudget(&rc)
	}
	rc.OnBudget = p.budgetSaver(rc)
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
	var seen int64 // requests counted so far (RunConfig.Calls)
	if rc.Calls != nil {
		seen = rc.Calls()
	}
	// progressed is what the sweep or probe under way was charged call by
	// call (onCall); charged is the rest of it when it returns.
	progressed := 0
	// charged is what went out to the service since the last charge:
	// every request (logins, refreshes, retries) where the client counts
	// them, else the calls the sweep or probe made itself.
	charged := func(own int) int {
		if rc.Calls == nil {
			own, progressed = max(own-progressed, 0), 0
			return own
		}
		n := rc.Calls()
		own, seen, progressed = int(n-seen), n, 0
		return own
	}
	// The budget is charged as the calls go out, and saved at most every
	// second or every saveEvery calls: a process killed inside a long
	// sweep (a first sync) leaves what it spent in the state file, less
	// what it made since the last save.
	var opStart, opStartPrev, lastSave time.Time
	unsaved := 0
	onCall := func(newCalls int) {
		var n int
		if rc.Calls == nil {
			n = newCalls
		} else {
			c := rc.Calls()
			n, seen = int(c-seen), c
		}
		progressed += n
		if n <= 0 {
			return
		}
		now := p.cfg.Now()
		rc.Budget.Take(now, n, throttle())
		if unsaved += n; unsaved < saveEvery && now.Sub(lastSave) < time.Second {
			return
		}
		unsaved, lastSave = 0, now
		// The next sweep's time as if the sweep ended now: a successor
		// is held as this process would be.
		gap, _ := rc.Budget.Gap(now, rc.Interval, throttle())
		rc.Budget.next, rc.Budget.gap = opStart.Add(gap), gap
		if rc.OnBudget != nil {
			rc.OnBudget(rc.Budget.Snapshot())
		}
	}
	report := p.cfg.OnProgress
	p.cfg.OnProgress = func(pr Progress) {
		onCall(pr.NewCalls)
		if report != nil {
			report(pr)
		}
	}
	defer func() { p.cfg.OnProgress = report }()
	// A probe in progress: the part of its window not read yet.
	var probe struct {
		on      bool
		to      time.Time     // the newest stamp it reads (the watermark minus probeLate when it began)
		width   time.Duration // of its last slice
		started time.Time
	}
	// The overlap's re-read, split off (secondlook.go); what it and the
	// probes read is in the read ledger (ledger.go), saved with every read.
	// An earlier version kept the second look's position in the budget's
	// record: the ledger starts from it when it has no record of its own.
	p.legacyChecked = rc.Budget.checked
	look := &secondLook{}
	// reread reads [from, to] again between two sweeps (a second look, a
	// probe's slice): its calls are charged as they go out and counted in
	// the pace as part of the sweep they follow, and its figures are added
	// to the sweep's (st). stop: ctx ended; the budget is saved.
	reread := func(st *Stats, from, to time.Time, maxCalls int, width *time.Duration, need time.Duration) (rs Stats, next time.Time, err error, stop bool) {
		rs, next, err = p.recheck(ctx, from, to, maxCalls, width, need)
		now := p.cfg.Now()
		in := progressed
		pc := charged(rs.Calls)
		rc.Budget.Take(now, pc, throttle())
		rc.Budget.Extra(in + pc) // taken call by call (onCall) and now
		st.Charged += in + pc
		if ctx.Err() != nil {
			if rc.OnBudget != nil {
				rc.OnBudget(rc.Budget.Snapshot())
			}
			return rs, next, err, true
		}
		st.Calls += rs.Calls
		st.Pages += rs.Pages
		st.Orders += rs.Orders
		st.Rescans += rs.Rescans
		st.BadEntries += rs.BadEntries
		for typ, n := range rs.Events {
			st.Events[typ] += n
		}
		return rs, next, err, false
	}
	for {
		p.applyRescan() // between two sweeps (rescan.go)
		if rc.Timings != nil {
			// Sweeps run one at a time, in this goroutine: the sweep reads
			// its settle and overlap from the config.
			was := p.cfg.Overlap
			p.cfg.Settle, p.cfg.Overlap = rc.Timings.Next()
			p.reads.relevel(was, p.cfg.Overlap, p.levels())
			p.probeLevel = 0
			if rc.Timings.Probing() {
				p.probeLevel = probeLate
			}
			rate, _ := rc.Budget.Rate()
			p.reread = look.reread(p.cfg.Overlap, p.cfg.Settle, rc.Interval, rate, rc.Timings.InForce().OverlapSource != SourceExplicit)
		}
		opStartPrev, opStart = opStart, p.cfg.Now()
		st, err := p.Sweep(ctx)
		inSweep := progressed
		rest := charged(st.Calls)
		st.Charged = inSweep + rest
		now := p.cfg.Now()
		rc.Budget.Take(now, rest, throttle())
		if !st.Baseline {
			// A first-sync sweep's calls are the bucket's to pay (taken
			// above), not a measure of what a sweep costs: counted in
			// the pace, a first sync cut by restarts would space the
			// one-call sweeps after it by the cost of its parts.
			rc.Budget.Cost(st.Charged)
		}
		if ctx.Err() != nil {
			// The sweep a shutdown cut short is charged and saved too.
			gap, _ := rc.Budget.Gap(now, rc.Interval, throttle())
			rc.Budget.next, rc.Budget.gap = st.Start.Add(gap), gap
			if rc.OnBudget != nil {
				rc.OnBudget(rc.Budget.Snapshot())
			}
			return nil
		}
		st.Timings.Interval, st.Timings.IntervalSource = rc.Budget.Pace(rc.Interval)
		if rc.Timings != nil {
			rc.Timings.SetInterval(st.Timings.Interval, st.Timings.IntervalSource)
			rc.Timings.Observe(now, st.LateArrivals, p.cfg.Settle, p.cfg.Overlap, false)
			look.swept(st, err, p.cfg.Overlap, p.page)
			// The newest second a read now reaches at the overlap's age
			// (ledger.record: a second is claimed at the reference minus
			// its end).
			horizon := st.Watermark.Add(-p.cfg.Overlap - time.Second)
			if !look.split {
				// The next sweep reads from what is owed (sweepFrom),
				// down to secondLookMax below its overlap: the second
				// look reads what lies below that.
				horizon = horizon.Add(-secondLookMax)
			}
			from, to, owed := p.owedWindow(p.cfg.Overlap, horizon)
			if owed && err == nil && !st.Watermark.IsZero() && look.due(from, horizon, st.Start.Sub(opStartPrev)) {
				// The second look: what left the overlap, read once more,
				// the whole window first (no slice width carried over).
				p.inLook = true // its finds are within the overlap: no warning (sweep.late)
				rs, _, lerr, stop := reread(&st, from, to, 2, nil, p.cfg.Overlap)
				p.inLook = false
				if stop {
					return nil
				}
				// Found below the overlap, but missed by the sweeps that read
				// its second within freshOverlap only: late by about that.
				late := make([]time.Duration, len(rs.LateArrivals))
				for i, d := range rs.LateArrivals {
					late[i] = min(d, min(freshOverlap, p.cfg.Overlap/2))
				}
				st.LateArrivals = append(st.LateArrivals, late...)
				st.SecondLook = true
				now = p.cfg.Now()
				rc.Timings.Observe(now, late, p.cfg.Settle, p.cfg.Overlap, false)
				if lerr != nil {
					p.log.Warn("the second look at the window that left the overlap ended early; the next one reads it again", "from", from.Format(time.RFC3339), "err", lerr)
				}
			}
			if err == nil && !probe.on && p.readsLoaded && !st.Watermark.IsZero() && p.probeLevel > 0 && rc.Timings.ProbeDue(now) {
				probe.on, probe.to, probe.width, probe.started = true, st.Watermark.Add(-p.probeLevel-time.Second), 0, now
			}
			// Where the short period leaves no room for a call besides the
			// sweeps', a probe slice would delay the next sweep: it waits
			// (for at most probeEvery).
			pace, _ := rc.Budget.Pace(rc.Interval)
			if probe.on && (slack(throttle(), pace) || now.Sub(probe.started) >= probeEvery) {
				// One slice of the probe after each sweep: a change waits
				// behind at most one slice of old pages. It reads what the
				// ledger still owes at the probes' age, and nothing else.
				pfrom, pto, owed := p.owedWindow(p.probeLevel, probe.to)
				var rs Stats
				var rerr error
				if owed {
					var stop bool
					rs, _, rerr, stop = reread(&st, pfrom, pto, 1, &probe.width, p.probeLevel)
					if stop {
						return nil
					}
					st.Probe = true
					_, _, owed = p.owedWindow(p.probeLevel, probe.to)
				}
				now = p.cfg.Now()
				switch {
				case rerr != nil:
					probe.on = false
					rc.Timings.Observe(now, rs.LateArrivals, p.cfg.Settle, p.cfg.Overlap, false)
					rc.Timings.ProbeFailed(now)
					p.log.Warn("a probe of the window below the overlap ended early; the next one reads it again", "from", pfrom.Format(time.RFC3339), "err", rerr)
				default:
					probe.on = owed
					rc.Timings.Observe(now, rs.LateArrivals, p.cfg.Settle, p.cfg.Overlap, !owed)
				}
				st.LateArrivals = append(st.LateArrivals, rs.LateArrivals...)
			}
		}
		th := throttle()
		gap, why := rc.Budget.Gap(now, rc.Interval, th)
		rc.Budget.next, rc.Budget.gap = st.Start.Add(gap), gap
		if rc.OnBudget != nil {
			rc.OnBudget(rc.Budget.Snapshot())
		}
		st.NextGap, st.GapReason = gap, why
		st.BudgetLeft, st.BudgetKnown = rc.Budget.Remaining(now, th)
		st.ReadOwed = p.ReadOwed(st.Watermark)
		st.Timings.Settle, st.Timings.Overlap = p.cfg.Settle, p.cfg.Overlap
		if rc.Timings != nil {
			st.Timings = rc.Timings.InForce()
		}
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

// saveEvery is how many calls of a sweep at most go out between two saves
// of the budget (and at most a second passes).
const saveEvery = 5

// slack says whether the short and the route period leave room for one
// more call before they reset, besides a one-call sweep every pace and the
// pacer's reserve (plenty.PeriodReserve). Unknown periods leave room.
func slack(th plenty.Throttle, pace time.Duration) bool {
	for _, per := range []plenty.Period{th.Short, th.Route} {
		if !per.Present || per.Limit == 0 || per.CallsLeft < 0 || per.Decay <= 0 || pace <= 0 {
			continue
		}
		if per.CallsLeft < int(per.Decay/pace)+2+plenty.PeriodReserve(per.Limit) {
			return false
		}
	}
	return true
}
