package poller

import (
	"context"
	"time"

	"github.com/orderwatch/orderwatch/diff"
)

// Recheck reads [from, to] again, a window below the watermark, for
// changes that became visible after the sweeps had passed them (late
// arrivals beyond the overlap): what it finds is diffed and committed like
// a sweep's, and the watermark does not move. It stops after the slice
// that brings its calls to maxCalls (0: no limit) and returns where the
// rest of the window begins (to when it read it all, or when an error
// ended it: a probe is not retried before the next). Its late arrivals
// are measured against the watermark. A Recheck runs between sweeps,
// never during one.
//
// Its slices are one page each (the calls between two sweeps stay few),
// and width carries the span of the last slice from one Recheck to the
// next (0: the whole window first), so that a probe spread over many
// sweeps does not pay for a call on the whole rest of the window in each.
//
// Every slice it verifies is recorded in the read ledger (ledger.go) as
// read at the age it had; a bulk second it could not page to its end is
// not, and the next recheck continues it.
func (p *Poller) Recheck(ctx context.Context, from, to time.Time, maxCalls int, width *time.Duration) (st Stats, next time.Time, err error) {
	return p.recheck(ctx, read{from: from, to: to, maxCalls: maxCalls, width: width})
}

// recheck is Recheck for a read the scheduler planned: one that owes the
// age rd.need continues a bulk second's cursor only where it began at that
// age or more; a second look's finds lie within the overlap (no warning).
func (p *Poller) recheck(ctx context.Context, rd read) (st Stats, next time.Time, err error) {
	from, to, maxCalls, width := rd.from, rd.to, rd.maxCalls, rd.width
	p.inLook = rd.look
	defer func() { p.inLook = false }()
	st = Stats{Start: p.cfg.Now(), Events: map[diff.Type]int{}, Lo: from, Hi: to}
	defer func() { st.Duration = p.cfg.Now().Sub(st.Start) }()
	meta, err := p.store.Meta()
	if err != nil {
		return st, from, err
	}
	p.loadReads(meta)
	st.Watermark = meta.Watermark
	if !meta.BaselineDone || to.Before(from) || to.After(meta.Watermark) {
		return st, to, nil // nothing to recheck (yet)
	}
	// held: no slice moves the watermark. Position, window and first-sync
	// share stay out of the progress reports (lo, hi and pos unset).
	sw := &sweep{p: p, st: &st, stop: ctx, held: true, maxCalls: maxCalls, recheck: true, need: rd.need,
		baseline: meta.Baseline, baselineDone: true, startMark: meta.Watermark, lateFrom: p.covered, ref: meta.Watermark}
	if width != nil {
		sw.width = *width
		defer func() {
			*width = sw.width
			if st.Calls > 1 {
				// The slice was cut: the next one a little narrower, so
				// that it takes one call.
				*width = max(sw.width*3/4, time.Second)
			}
		}()
	}
	pages := p.cfg.SlicePages
	p.cfg.SlicePages = 1 // Recheck runs between sweeps, in their goroutine
	defer func() { p.cfg.SlicePages = pages }()
	err = sw.run(ctx, from, to)
	if !sw.stopped.IsZero() {
		return st, sw.stopped, err
	}
	return st, to, err
}
