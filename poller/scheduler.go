package poller

import (
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

// scheduler decides what Run does between two sweeps: whether the second
// look reads now and what, whether a probe starts, which slice of it is
// read next, and whether there is room for it. Each decision is a function
// of the read ledger (what is owed, ledger.go), the measured density and
// page size (secondLook), the budget's pace and the service's throttle
// headers; the loop (Run) asks and does what it is told.
type scheduler struct {
	look  secondLook
	probe probe
}

// probe is a probe under way: it reads what the ledger owes at the
// probes' age up to to (the watermark minus that age when it began), one
// slice after each sweep.
type probe struct {
	on      bool
	to      time.Time
	width   time.Duration // of its last slice, carried to the next
	started time.Time     // local clock
	slices  int           // read so far
}

// A probe's slices are paced (probePace): probeSpeed times the rate at
// which the timeline it reads fills pages, so that a busy shop's probe
// takes calls at an even rate over about two thirds of its window's time
// instead of one after every sweep (which doubled the sweeps' gap while
// it ran and left them short of a page after it); never slower than a
// slice every probeSliceGap.
const (
	probeSpeed    = 1.5
	probeSliceGap = 30 * time.Second
)

// probePace is the probe's slices a second while the sweeps split (l: a
// busy shop, whose sweeps are near a page) at the density measured (0:
// unpaced: a slice after every sweep, as in a quiet shop, whose one-call
// sweeps are far from a page, and a dense past is read at once).
func probePace(l secondLook) float64 {
	density, page := l.density, l.page
	if !l.split || density <= 0 || page <= 0 {
		return 0
	}
	return max(probeSpeed*density/(pageFill*float64(page)), 1/probeSliceGap.Seconds())
}

// read is one re-read the loop makes: the window [from, to] (both ends
// included), at most maxCalls calls, owing the age need; width carries a
// probe's slice width (nil: the whole window first); look says it is a
// second look (its finds lie within the overlap: no warning).
type read struct {
	from, to time.Time
	maxCalls int
	need     time.Duration
	width    *time.Duration
	look     bool
}

// lookHorizon is the newest stamp the second look reads after a sweep up
// to the watermark: the second a read now reaches at the overlap's age
// (ledger.record), and, while the sweeps read the whole overlap
// (sweepFrom reads down to what is owed, secondLookMax at most), below
// their reach.
func lookHorizon(watermark time.Time, overlap time.Duration, split bool) time.Time {
	h := watermark.Add(-overlap - time.Second)
	if !split {
		h = h.Add(-secondLookMax)
	}
	return h
}

// While the call budget is in debt or about to be (lean: less than a call
// left), every call goes at the refill's pace and the gap between sweeps
// is every change's freshness:
// the re-reads, which owe their reads at an age of the overlap (the second
// look) or of minutes (the probes), yield to the sweeps. The second look
// waits until what it owes has trailed leanLookMax (then it reads, and the
// ledger's promised age is kept: a read later than the age still reads
// at it); a probe's slice waits for room as it does for a tight short
// period, at most probeEvery from the probe's start (probeSlice). In debt
// the sweeps pay the debt back (derivedShare), so the bucket refills and
// the re-reads go on; a sweep that itself spends more than the refill
// never starves them past those bounds.
const leanLookMax = time.Minute

// yields says whether a re-read that has waited waited for its reads (the
// oldest stamp it owes, past its due) waits longer for the sweeps: while
// the budget is lean, up to most.
func yields(lean bool, waited, most time.Duration) bool {
	return lean && waited < most
}

// secondLook says what the second look reads after a verified sweep that
// left the watermark at watermark, gap after the one before: the ledger's
// lowest owed stretch at the overlap's age below lookHorizon, when it is
// due (secondLook.due) and does not yield to the sweeps (lean: the
// budget cannot pay for another call). reads is nil before the ledger is loaded (a first
// sync).
func (s *scheduler) secondLook(reads *ledger, watermark time.Time, overlap time.Duration, lean bool) (read, bool) {
	if reads == nil || watermark.IsZero() {
		return read{}, false
	}
	horizon := lookHorizon(watermark, overlap, s.look.split)
	from, to, ok := reads.window(overlap, horizon)
	if !ok || !s.look.due(from, horizon) || yields(lean, horizon.Add(time.Second).Sub(from), leanLookMax) {
		return read{}, false
	}
	if span := s.look.pageSpan(); span > 0 && to.Sub(from) >= span {
		// A page's worth; the rest stays owed, read after the next sweep.
		// A window of more pages costs a call more than it reads (its
		// first call finds it too large, and the two calls at most read
		// the page the slice is cut to): a page's worth after each sweep
		// is a second look's whole stretch at 20 changes a second every
		// 11 s of sweeps, and the look trailing (after a lean spell, a
		// restart) catches up by a page after each sweep.
		to = from.Add(span - time.Second)
	}
	return read{from: from, to: to, maxCalls: 2, need: overlap}, true
}

// startProbe starts a probe after a verified sweep when the probes run
// (level > 0), the ledger is loaded and Timings says one is due: it reads
// what is owed at level up to the watermark minus level.
func (s *scheduler) startProbe(loaded bool, watermark time.Time, level time.Duration, due bool, now time.Time) {
	if s.probe.on || !loaded || watermark.IsZero() || level <= 0 || !due {
		return
	}
	s.probe = probe{on: true, to: watermark.Add(-level - time.Second), started: now}
}

// probeSlice says whether the probe under way reads a slice now, and
// which: one slice after a sweep, at most pace slices a second since it
// started (0: one after each sweep), where the short period leaves room
// for a call besides the sweeps' (room) and the budget is not lean (the
// slice yields to the sweeps), or once the probe has waited probeEvery
// for it. done says nothing is owed up to its end: it ended.
func (s *scheduler) probeSlice(reads *ledger, level time.Duration, room, lean bool, pace float64, now time.Time) (r read, run, done bool) {
	waited := now.Sub(s.probe.started)
	if !s.probe.on || reads == nil || !room && waited < probeEvery || yields(lean, waited, probeEvery) {
		return read{}, false, false
	}
	from, to, ok := reads.window(level, s.probe.to)
	if !ok {
		return read{}, false, true
	}
	if pace > 0 && float64(s.probe.slices) >= 1+now.Sub(s.probe.started).Seconds()*pace {
		return read{}, false, false
	}
	s.probe.slices++
	return read{from: from, to: to, maxCalls: 1, need: level, width: &s.probe.width}, true, false
}

// probeRead takes the outcome of a probe's slice: an error ends the probe
// (its window stays owed: the next one reads it); otherwise it ends once
// the ledger owes nothing more up to its end.
func (s *scheduler) probeRead(reads *ledger, level time.Duration, err error) (ended bool) {
	if err != nil {
		s.probe.on = false
		return true
	}
	if _, _, owed := reads.window(level, s.probe.to); !owed {
		s.probe.on = false
		return true
	}
	return false
}

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
