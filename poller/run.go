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

// Run sweeps until ctx is done: one sweep, then what the scheduler says
// (a second look, a probe's slice), then a wait of the interval
// (stretched when the call budget runs low), and so on. A failed sweep is
// reported and retried after the interval; it never ends Run.
func (p *Poller) Run(ctx context.Context, rc RunConfig) error {
	r := p.newRunner(ctx, rc)
	if !r.waitForPredecessor() {
		return nil
	}
	defer r.countCalls()()
	for {
		r.prepare()
		st, err := r.sweep()
		if ctx.Err() != nil {
			r.saveAfter(st.Start) // the sweep a shutdown cut short is charged and saved too
			return nil
		}
		if r.after(&st, err) {
			return nil
		}
		if !r.finish(st, err) {
			return nil
		}
	}
}

// runner is one Run: the call accounting between the sweeps, the
// scheduler, and what they report.
type runner struct {
	p   *Poller
	ctx context.Context
	rc  RunConfig
	sch scheduler
	// seen: requests counted so far (RunConfig.Calls); progressed: what
	// the sweep or read under way was charged call by call (onCall).
	seen       int64
	progressed int
	// opStart: the sweep under way began. unsaved calls went out since
	// the budget was last saved, the first of them at unsavedSince; saved:
	// this Run saved it once.
	opStart, unsavedSince time.Time
	unsaved               int
	saved                 bool
	watermark             time.Time // after the last sweep
}

// saveEvery is how many calls at most go out unsaved (and none goes out
// while one made over a second before is unsaved): the budget is saved
// when the saveEvery-th goes out, or a call goes out a second or more
// after the first unsaved one, and at the end of every sweep. A sweep of
// one call (the steady state) is saved once, at its end; a process's first
// call is saved at once (with the next sweep's time): processes killed
// each after a call or two (a crash loop) are charged and held.
const saveEvery = 5

func (p *Poller) newRunner(ctx context.Context, rc RunConfig) *runner {
	if rc.Budget == nil {
		rc.Budget = NewBudget(rc.CallShare)
		p.restoreBudget(&rc)
	}
	rc.OnBudget = p.budgetSaver(rc)
	// An earlier version kept the second look's position in the budget's
	// record: the read ledger starts from it when it has none (reads.go).
	p.legacyChecked = rc.Budget.LegacyChecked()
	r := &runner{p: p, ctx: ctx, rc: rc}
	if rc.Calls != nil {
		r.seen = rc.Calls()
	}
	return r
}

// throttle is what the service last said of its limits.
func (r *runner) throttle() plenty.Throttle {
	if r.rc.Throttle == nil {
		return plenty.Throttle{}
	}
	return r.rc.Throttle()
}

// waitForPredecessor holds the first sweep until the time a previous
// process set (the budget binds this one as it bound that one); false:
// ctx ended.
func (r *runner) waitForPredecessor() bool {
	p := r.p
	next := r.rc.Budget.NotBefore()
	if !next.After(p.cfg.Now()) {
		return true
	}
	p.log.Info("call budget: the first sweep waits for the time the previous process set", "next_sweep", next.Format(time.RFC3339))
	return p.cfg.Sleep(r.ctx, next.Sub(p.cfg.Now())) == nil
}

// countCalls charges the calls of every sweep and read as they go out
// (the sweep's progress reports); it returns the undo.
func (r *runner) countCalls() func() {
	return r.p.alsoOnProgress(func(pr Progress) { r.onCall(pr.NewCalls) })
}

// onCall takes calls from the budget as they go out, and saves it every
// saveEvery calls or a second after the first unsaved one: a process
// killed inside a long sweep (a first sync) leaves what it spent in the
// state file, less the last few calls (saveEvery at most).
func (r *runner) onCall(newCalls int) {
	n := newCalls
	if r.rc.Calls != nil {
		c := r.rc.Calls()
		n, r.seen = int(c-r.seen), c
	}
	r.progressed += n
	if n <= 0 {
		return
	}
	now := r.p.cfg.Now()
	r.rc.Budget.Take(now, n, r.throttle())
	if r.unsaved == 0 {
		r.unsavedSince = now
	}
	if r.unsaved += n; r.saved && r.unsaved < saveEvery && now.Sub(r.unsavedSince) < time.Second {
		return
	}
	// The next sweep's time as if the sweep ended now: a successor is
	// held as this process would be.
	r.saveAfter(r.opStart)
}

// charged is what went out to the service since the last charge, less
// what onCall took already: every request (logins, refreshes, retries)
// where the client counts them, else the calls the sweep or read made
// itself (own). in is what onCall took.
func (r *runner) charged(own int) (in, rest int) {
	in = r.progressed
	r.progressed = 0
	if r.rc.Calls == nil {
		return in, max(own-in, 0)
	}
	n := r.rc.Calls()
	rest, r.seen = int(n-r.seen), n
	return in, rest
}

// saveAfter sets the next sweep's time from the sweep that began at start
// and saves the budget.
func (r *runner) saveAfter(start time.Time) {
	b := r.rc.Budget
	gap, _ := b.Gap(r.p.cfg.Now(), r.rc.Interval, r.throttle())
	b.SetNext(start.Add(gap), gap)
	r.save()
}

// save hands the budget's state to OnBudget (which saves it first).
func (r *runner) save() {
	r.unsaved, r.saved = 0, true
	if r.rc.OnBudget != nil {
		r.rc.OnBudget(r.rc.Budget.Snapshot())
	}
}

// prepare sets what the next sweep reads: settle, overlap and the
// promised ages from the measured timings, and how far below the
// watermark (the split, secondlook.go).
func (r *runner) prepare() {
	p, rc := r.p, r.rc
	p.applyRescan() // between two sweeps (rescan.go)
	if rc.Timings == nil {
		return
	}
	settle, overlap := rc.Timings.Next()
	rate, _ := rc.Budget.Rate()
	reread := r.sch.look.reread(overlap, settle, rc.Interval, rate, rc.Timings.InForce().OverlapSource != SourceExplicit)
	p.setTimings(settle, overlap, rc.Timings.Probing(), reread, r.watermark)
	p.pageSpan = r.sch.look.pageSpan()
}

// sweep runs one sweep and charges it.
func (r *runner) sweep() (Stats, error) {
	p := r.p
	r.opStart = p.cfg.Now()
	st, err := p.Sweep(r.ctx)
	r.watermark = st.Watermark
	in, rest := r.charged(st.Calls)
	st.Charged = in + rest
	r.rc.Budget.Take(p.cfg.Now(), rest, r.throttle())
	if !st.Baseline {
		// A first-sync sweep's calls are the bucket's to pay (taken
		// above), not a measure of what a sweep costs: counted in the
		// pace, a first sync cut by restarts would space the one-call
		// sweeps after it by the cost of its parts.
		r.rc.Budget.Cost(st.Charged)
	}
	return st, err
}

// reread makes one read the scheduler asked for between two sweeps (a
// second look, a probe's slice): its calls are charged as they go out and
// counted in the pace as part of the sweep they follow, and its figures
// are added to the sweep's (st). stop: ctx ended (the budget is saved).
func (r *runner) reread(st *Stats, rd read) (rs Stats, err error, stop bool) {
	p := r.p
	rs, _, err = p.recheck(r.ctx, rd)
	in, rest := r.charged(rs.Calls)
	r.rc.Budget.Take(p.cfg.Now(), rest, r.throttle())
	r.rc.Budget.Extra(in + rest) // taken call by call (onCall) and now
	st.Charged += in + rest
	if r.ctx.Err() != nil {
		r.save()
		return rs, err, true
	}
	st.add(rs)
	return rs, err, false
}

// after does what the scheduler says after a sweep: the second look and
// a probe's slice (with Timings only). stop: ctx ended.
func (r *runner) after(st *Stats, err error) (stop bool) {
	p, rc := r.p, r.rc
	st.Timings.Interval, st.Timings.IntervalSource = rc.Budget.Pace(rc.Interval)
	if rc.Timings == nil {
		return false
	}
	rc.Timings.SetInterval(st.Timings.Interval, st.Timings.IntervalSource)
	rc.Timings.Observe(p.cfg.Now(), st.LateArrivals, p.cfg.Settle, p.cfg.Overlap, false)
	r.sch.look.swept(*st, err, p.cfg.Overlap, p.pageSize())
	if err != nil {
		return false
	}
	if rd, ok := r.sch.secondLook(p.ledger(), st.Watermark, p.cfg.Overlap, r.lean()); ok {
		if r.secondLook(st, rd) {
			return true
		}
	}
	r.sch.startProbe(p.readsLoaded, st.Watermark, p.probeLevel, rc.Timings.ProbeDue(p.cfg.Now()), p.cfg.Now())
	return r.probe(st)
}

// secondLook reads what left the overlap once more (secondlook.go).
func (r *runner) secondLook(st *Stats, rd read) (stop bool) {
	p := r.p
	rd.look = true // its finds are within the overlap: no warning (sweep.late)
	rs, err, stop := r.reread(st, rd)
	if stop {
		return true
	}
	// Found below the overlap, but missed by the sweeps that read its
	// second within freshOverlap only: late by about that.
	late := make([]time.Duration, len(rs.LateArrivals))
	for i, d := range rs.LateArrivals {
		late[i] = min(d, min(freshOverlap, p.cfg.Overlap/2))
	}
	st.LateArrivals = append(st.LateArrivals, late...)
	st.SecondLook = true
	r.rc.Timings.Observe(p.cfg.Now(), late, p.cfg.Settle, p.cfg.Overlap, false)
	if err != nil {
		p.log.Warn("the second look at the window that left the overlap ended early; the next one reads it again", "from", rd.from.Format(time.RFC3339), "err", err)
	}
	return false
}

// probe reads the probe's next slice, when the scheduler says so: what
// the ledger still owes at the probes' age, and nothing else; a change
// waits behind at most one slice of old pages.
func (r *runner) probe(st *Stats) (stop bool) {
	p, tm := r.p, r.rc.Timings
	pace, _ := r.rc.Budget.Pace(r.rc.Interval)
	rd, run, done := r.sch.probeSlice(p.ledger(), p.probeLevel, slack(r.throttle(), pace), r.lean(), probePace(r.sch.look), p.cfg.Now())
	if done {
		r.sch.probe.on = false
		tm.Observe(p.cfg.Now(), nil, p.cfg.Settle, p.cfg.Overlap, true)
	}
	if !run {
		return false
	}
	rs, err, stop := r.reread(st, rd)
	if stop {
		return true
	}
	st.Probe = true
	st.LateArrivals = append(st.LateArrivals, rs.LateArrivals...)
	ended := r.sch.probeRead(p.ledger(), p.probeLevel, err)
	now := p.cfg.Now()
	tm.Observe(now, rs.LateArrivals, p.cfg.Settle, p.cfg.Overlap, ended && err == nil)
	if err != nil {
		tm.ProbeFailed(now)
		p.log.Warn("a probe of the window below the overlap ended early; the next one reads it again", "from", rd.from.Format(time.RFC3339), "err", err)
	}
	return false
}

// lean says the call budget cannot pay for another call (less than one
// left: the next is paid in debt): the re-reads yield to the sweeps
// (scheduler.go, leanLookMax).
func (r *runner) lean() bool {
	level, known := r.rc.Budget.Remaining(r.p.cfg.Now(), r.throttle())
	return known && level < 1
}

// finish reports the sweep (OnSweep) with the gap to the next and the
// budget, saves the budget and waits; false: ctx ended.
func (r *runner) finish(st Stats, err error) bool {
	p, rc := r.p, r.rc
	now, th := p.cfg.Now(), r.throttle()
	gap, why := rc.Budget.Gap(now, rc.Interval, th)
	rc.Budget.SetNext(st.Start.Add(gap), gap)
	r.save()
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
	if wait := st.Start.Add(gap).Sub(p.cfg.Now()); wait > 0 && p.cfg.Sleep(r.ctx, wait) != nil {
		return false
	}
	if p.cfg.Yield != nil {
		p.cfg.Yield(r.ctx)
	}
	return r.ctx.Err() == nil
}
