package poller

import (
	"slices"
	"time"

	"github.com/orderwatch/orderwatch/state"
)

// The Poller's side of the read ledger (ledger.go): which ages it
// promises, where it loads the ledger from, and how a verified read is
// recorded in the same transaction as its events.

// levels are the ages the ledger owes every second, ascending: the
// overlap in force (the sweeps and the second look), and probeLate while
// the probes run (Run sets probeLevel).
func (p *Poller) levels() []time.Duration {
	l := []time.Duration{p.cfg.Overlap}
	if p.probeLevel > 0 && p.probeLevel != p.cfg.Overlap {
		l = append(l, p.probeLevel)
	}
	slices.Sort(l)
	return l
}

// Ages are measured on the watermark, as the late arrivals are (how far
// below the watermark a change was when it became visible: Timings): a
// read that begins when the watermark is at w sees every change at a stamp
// x that became visible before the watermark passed x + (w - x), its age.
// A sweep's reads begin at the watermark it started from, a recheck's at
// the watermark when it began, a bulk second's at the watermark when its
// keyset paging began.

// loadReads reads the ledger once per process, after the clock record
// (loadClock): a restored ledger is bounded by the service's evidence (the
// stamp bound carried over the restart, or the watermark), never by the
// local clock. Without a record: a new state file owes nothing before its
// start; one of an earlier version owes what its second look may not have
// read (from the budget's legacy position, or the overlap and 2 x
// secondLookMax below the watermark) and, at the probes' age, a probe's
// first window below it.
func (p *Poller) loadReads(meta state.Meta) {
	if p.readsLoaded {
		return
	}
	if !meta.BaselineDone {
		// The first sync is silent (its orders are the baseline): the
		// ledger starts when it is done, owing the minutes before its end
		// as a restart does.
		return
	}
	p.readsLoaded = true
	bound := meta.Watermark
	if b, ok := p.ev.now(p.cfg.Now()); ok && b.After(bound) {
		bound = b
	}
	lv := p.levels()
	top := lv[len(lv)-1]
	var l ledger
	found, err := p.store.LoadRecord(LedgerRecord, &l)
	if found && err == nil && l.FloorAge == 0 {
		// An earlier version's: as it was meant, checked against the
		// evidence as the rest. Set after validate, it would also turn
		// the floor's age of a cut record (0: no promised age below a
		// floor at the bound) into a claim of the top age there.
		l.FloorAge = top
	}
	switch {
	case err != nil:
		p.log.Warn("the read ledger in the state file is unreadable: what its second looks and probes had read is read again", "record", LedgerRecord, "err", err)
		found = false
	case found && l.validate(bound):
		p.log.Warn("the read ledger claims reads beyond the service's clock evidence (a damaged record): cut to it, the rest is read again",
			"record", LedgerRecord, "bound", bound.Format(time.RFC3339))
	}
	if !found {
		l = p.legacyReads(meta.Watermark, bound)
		l.FloorAge = top
	}
	l.raise(top, meta.Watermark.Add(-top-time.Second))
	l.compact(lv)
	p.reads = l
}

// legacyReads is the ledger of a state file written before it, or of one
// whose first sync just ended: below
// checked (the second look's position an earlier version kept in the
// budget's record, when the evidence vouches for it) every second was read
// at the overlap's age; above it, nothing is known.
func (p *Poller) legacyReads(watermark, bound time.Time) ledger {
	checked := p.legacyChecked
	if checked.IsZero() || checked.After(bound) || checked.After(watermark) {
		checked = watermark.Add(-p.cfg.Overlap - 2*secondLookMax)
	}
	checked = sec(checked)
	floor := checked.Add(-probeLate - probeEvery)
	return ledger{Floor: floor, Spans: []span{{From: floor, To: checked, Age: p.cfg.Overlap}}}
}

// claim is a verified read to record: the window [lo, hi] read completely
// by a read that began when the watermark was at ref (zero: none yet,
// nothing recorded).
type claim struct {
	lo, hi, ref time.Time
}

// withClaim returns the records of a commit with the ledger that records
// the pending claim, and the ledger to keep once the commit is stored.
func (s *sweep) withClaim(recs []state.Record) ([]state.Record, *ledger) {
	c := s.claim
	s.claim = nil
	if c == nil || c.ref.IsZero() || !s.p.readsLoaded {
		return recs, nil
	}
	l := s.p.reads.clone()
	l.record(c.lo, c.hi, c.ref, s.p.levels())
	return append(recs, state.Record{Name: LedgerRecord, Value: l}), &l
}

// clone copies the ledger.
func (l *ledger) clone() ledger {
	return ledger{Floor: l.Floor, FloorAge: l.FloorAge, Spans: slices.Clone(l.Spans)}
}

// rewound takes a watermark rewound by a clock: what was read before was
// read earlier on the clock that stamps the new changes (ledger.rewind).
func (p *Poller) rewound(from, to time.Time) {
	p.reads.rewind(from.Sub(to), p.levels())
	if err := p.store.SaveRecord(LedgerRecord, p.reads); err != nil {
		p.log.Warn("saving the read ledger after a rewind failed; a restart cuts it to the clock evidence", "err", err)
	}
}

// ReadOwed is how long the oldest stamp still owed a read at a promised
// age has been due (0: none), as of the watermark: the state report's and
// the metric's figure (Stats.ReadOwed).
func (p *Poller) ReadOwed(watermark time.Time) time.Duration {
	if !p.readsLoaded || watermark.IsZero() {
		return 0
	}
	return p.reads.overdue(p.levels(), watermark)
}

// sweepFrom is where a sweep from the watermark begins: the overlap below
// it, or what the split reads (Run sets reread: the second look reads the
// rest, secondlook.go; split says whether it may, false after a rewind).
// A sweep that reads the whole overlap reads from where the ledger first
// owes a read at the overlap's age, up to secondLookMax further down: each
// stamp is then last read by a sweep at the overlap's age or more (a sweep
// from the watermark minus the overlap leaves the stamps above it short of
// it by up to a gap), and the second look reads what is owed further down.
func (p *Poller) sweepFrom(watermark time.Time, split bool) time.Time {
	ov := p.cfg.Overlap
	if p.reread > 0 && p.reread < ov && split {
		return watermark.Add(-p.reread)
	}
	lo := watermark.Add(-ov)
	if !p.readsLoaded || p.reread <= 0 {
		return lo // not under Run's second look: the overlap, as it is
	}
	if from, _, ok := p.reads.owed(ov, sec(lo)); ok {
		lo = maxTime(from, lo.Add(-secondLookMax))
	}
	return lo
}

// owedWindow is the ledger's next window to read at age level, up to the
// stamp upto (ledger.window); nothing before the ledger is loaded (a
// first sync: its orders are the baseline).
func (p *Poller) owedWindow(level time.Duration, upto time.Time) (lo, hi time.Time, ok bool) {
	if !p.readsLoaded {
		return time.Time{}, time.Time{}, false
	}
	return p.reads.window(level, upto)
}

// ledger is the read ledger, nil before it is loaded (the scheduler's
// view: nothing planned during a first sync).
func (p *Poller) ledger() *ledger {
	if !p.readsLoaded {
		return nil
	}
	return &p.reads
}

// setTimings sets what the next sweep reads (Run, between two sweeps):
// settle and overlap, whether the probes run (the ledger then owes every
// second a read at probeLate), and how far below the watermark it reads
// (secondlook.go). What the ledger holds at the overlap's age follows a
// change of it (ledger.relevel).
// watermark is the last sweep's (zero: none yet).
func (p *Poller) setTimings(settle, overlap time.Duration, probing bool, reread time.Duration, watermark time.Time) {
	was, before := p.cfg.Overlap, p.levels()
	p.cfg.Settle, p.cfg.Overlap = settle, overlap
	p.probeLevel = 0
	if probing {
		p.probeLevel = probeLate
	}
	// Never past an age promised before or now (the probes' stop when
	// the overlap reaches its ceiling: what was read at the overlap did
	// not keep theirs).
	horizon := time.Time{}
	if !watermark.IsZero() {
		horizon = watermark.Add(-overlap - time.Second)
	}
	now := p.levels()
	p.reads.relevel(was, overlap, before, horizon)
	if top := now[len(now)-1]; p.readsLoaded && !watermark.IsZero() {
		p.reads.raise(top, watermark.Add(-top-time.Second))
	}
	p.reads.compact(now)
	p.reread = reread
}

// pageSize is the service's page size, as its envelopes say (0: none seen).
func (p *Poller) pageSize() int64 { return p.page }

// alsoOnProgress calls fn with every progress report too (Run charges the
// calls as they go out); it returns the undo.
func (p *Poller) alsoOnProgress(fn func(Progress)) func() {
	report := p.cfg.OnProgress
	p.cfg.OnProgress = func(pr Progress) {
		fn(pr)
		if report != nil {
			report(pr)
		}
	}
	return func() { p.cfg.OnProgress = report }
}
