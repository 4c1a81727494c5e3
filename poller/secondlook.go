package poller

import (
	"math"
	"time"
)

// The second look. A sweep reads its window [watermark - overlap, now -
// settle]: every second of the service's timeline is read once when it is
// new and again in every sweep while it lies within the overlap, so that a
// change whose commit became visible late (up to the overlap) is found.
// In a busy shop the overlap's orders cost pages: at 20 changes a second an
// overlap of 10 s is 200 orders, and a one-page sweep becomes a two-page one
// (the pace, derived from what a sweep costs, then doubles: sweeps twice
// as far apart, windows twice as full).
//
// When that is dearer, the sweeps read only freshOverlap below the
// watermark, and the rest of the overlap is read once more, in one go, when
// it has left the overlap (a second look: [checked, watermark - overlap], by
// Recheck, a page per call): every second is still read at an age of the
// overlap or more, once, instead of in every sweep. A change late by up to
// freshOverlap is found by the next sweep as before; one late by more, up
// to the overlap, by the second look (at most secondLookMax plus the
// overlap after its stamp); one later still by the probe (Timings), as
// before.
const (
	// freshOverlap is what a sweep reads below the watermark while the
	// overlap's re-read is split off (never more than half the overlap).
	freshOverlap = 5 * time.Second
	// secondLookMax is how far the second look may trail: it reads what
	// has left the overlap once that holds most of a page, or is this long.
	secondLookMax = 30 * time.Second
	// pageFill is the share of a page a window is planned to fill: the
	// number of changes in a window varies from sweep to sweep.
	pageFill = 0.9
	// lookFill is the share of a page the second look reads on average:
	// it reads once another sweep's worth would pass lookMost of a page,
	// in one call (the first page of its window says the window's size).
	lookFill = 0.85
	lookMost = 0.95
	// densityWeight is the weight of the newest sweep in the measured
	// density of changes (an exponentially weighted mean as it falls; a
	// denser window sets it at once, see swept), measured on
	// windows of at most the overlap plus densityWindow (a catch-up's
	// window holds each order once however often it changed: not a
	// sweep's density; an overlap over a minute must not stop the
	// measure, or the split is never taken where it pays most).
	densityWeight = 0.5
	densityWindow = time.Minute
)

// secondLook is the Run loop's state of the split re-read: whether the
// sweeps split, and the density and page size that decide it. What it has
// read is in the read ledger (ledger.go): it reads the ledger's owed
// stretch below the watermark minus the overlap.
type secondLook struct {
	split    bool    // the sweeps read freshOverlap only
	density  float64 // orders per second of window (measured)
	page     int64   // the service's page size (measured)
	measured bool    // a sweep of this process was seen (the first is a catch-up)
}

// reread is what the next sweep reads below the watermark under overlap:
// the overlap; freshOverlap when splitting pays (see splitPays: the
// density measured, the pace of the budget at rate calls a second or an
// explicit interval).
func (l *secondLook) reread(overlap, settle, interval time.Duration, rate float64, derived bool) time.Duration {
	fresh := min(freshOverlap, overlap/2)
	l.split = derived && l.measured && splitPays(l.density, overlap+settle, fresh+settle, float64(l.page), rate, interval)
	if l.split {
		return fresh
	}
	return overlap
}

// swept takes a verified sweep's figures: the density of its window.
func (l *secondLook) swept(st Stats, err error, overlap time.Duration, page int64) {
	if page > 0 {
		l.page = page
	}
	if err != nil || st.Watermark.IsZero() {
		return
	}
	// The window's new part (beyond what it reads again) is at most
	// densityWindow; a process's first sweep may be a catch-up.
	if w := st.Hi.Sub(st.Lo); !st.Baseline && l.measured && w >= time.Second && w <= overlap+densityWindow {
		d := float64(st.Entries) / w.Seconds()
		if d > l.density {
			// Denser: at once. A shop turning busy splits from the first
			// window that shows it; a mean that lags leaves the sweeps
			// reading the whole overlap in two pages meanwhile, and their
			// median cost doubles the gap (TestTurningBusyKeepsThePace).
			l.density = d
		} else {
			l.density += densityWeight * (d - l.density)
		}
	}
	l.measured = true
}

// due says whether to read now what is owed from from up to horizon (the
// watermark minus the overlap): once it holds lookFill of a page by the
// density measured (it reads a page's worth, pageSpan, in one call), or
// the oldest owed stamp has waited secondLookMax, or the sweeps no longer
// split (what is left is read at once).
func (l *secondLook) due(from, horizon time.Time) bool {
	span := horizon.Add(time.Second).Sub(from)
	if span < time.Second {
		return false
	}
	full := l.page > 0 && l.density*span.Seconds() >= lookFill*float64(l.page)
	return !l.split || span >= secondLookMax || full
}

// pageSpan is the stretch of the timeline that fills pageFill of a page
// at the density measured, while the sweeps split (0: none: the sweeps
// read the whole overlap, or nothing is measured yet).
func (l *secondLook) pageSpan() time.Duration {
	if !l.split || l.density <= 0 || l.page <= 0 {
		return 0
	}
	return max(time.Duration(pageFill*float64(l.page)/l.density*float64(time.Second)).Truncate(time.Second), time.Second)
}

// splitPays says whether sweeps reading fresh below the watermark plus a
// second look are fresher (a shorter gap between sweeps at the same calls a
// second) than sweeps reading the whole overlap, at a density of rho orders
// per second of the service's timeline and pages of page entries. A sweep's
// window is the gap plus what it reads again: overlap or fresh, each with
// the settle (the watermark stays settle below the newest stamp served). With an
// explicit interval (> 0) the gap is fixed and the cheaper way is taken;
// without one the gap is the least that keeps the calls a second within
// rate (the budget's refill). Windows are planned to fill pageFill of a
// page.
func splitPays(rho float64, overlap, fresh time.Duration, page, rate float64, interval time.Duration) bool {
	if fresh >= overlap || rho <= 0 || page <= 0 {
		return false
	}
	capacity := pageFill * page
	look := max(rho/(lookFill*page), 1/secondLookMax.Seconds()) // the second look's calls a second
	if interval > 0 {
		g := interval.Seconds()
		return sweepCalls(rho, g, fresh, capacity)/g+look < sweepCalls(rho, g, overlap, capacity)/g
	}
	whole, okWhole := leastGap(rho, overlap, capacity, rate, 0)
	split, okSplit := leastGap(rho, fresh, capacity, rate, look)
	switch {
	case !okSplit:
		return false
	case !okWhole:
		return true
	}
	return split < whole
}

// sweepCalls is the pages a sweep every g seconds reads with reread below
// the watermark.
func sweepCalls(rho, g float64, reread time.Duration, capacity float64) float64 {
	return max(1, math.Ceil(rho*(g+reread.Seconds())/capacity))
}

// leastGap is the shortest gap (seconds, at least MinGap) between sweeps
// reading reread below the watermark whose pages, plus extra calls a
// second, stay within rate calls a second; false when none of up to 64
// pages a sweep does.
func leastGap(rho float64, reread time.Duration, capacity, rate, extra float64) (float64, bool) {
	if rate <= extra {
		return 0, false
	}
	for k := 1; k <= 64; k++ {
		g := max(float64(k)/(rate-extra), MinGap.Seconds())
		if rho*(g+reread.Seconds()) <= float64(k)*capacity {
			return g, true
		}
	}
	return 0, false
}
