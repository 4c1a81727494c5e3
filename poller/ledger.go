package poller

import (
	"slices"
	"time"
)

// The read ledger. Sweeps, second looks and probes read the same timeline
// of the service (its updatedAt stamps) at different ages: a change that
// becomes visible l after its stamp is found by a read of its second that
// starts l or more after the stamp, and by no earlier one. What the
// promise owes a second is a complete, verified read at each promised age
// (the overlap in force; probeLate while the probes run); the ledger says
// which stretches were read so, at what age, and plans every re-read
// from its gaps. It is the one place that knows what has been read: no
// path keeps a position of its own.
//
// Its times are the service's (stamps, and the reads' reference: the
// watermark when the read began, see reads.go), never the local clock. Only a read that got to its
// end, verified (constant totalsCount, every page, every order of a bulk
// second), is recorded; one that fails, is cut or stops at a page limit
// leaves its stretch owed. It is committed in the same transaction as the
// events of the read it records (sweep.flush), so it never claims what the
// state file does not hold; it travels to the group with the checkpoint
// of that transaction (state.Checkpoint carries every record but a
// replica's own).

// LedgerRecord is the name of the read ledger's state record.
const LedgerRecord = "reads"

// maxSpans bounds the ledger: past it, touching spans merge at the lower
// age and then the lowest spans are forgotten (read again): never a claim
// of more than was read.
const maxSpans = 64

// span says that every stamp in [From, To) (whole seconds) was read
// completely and verified at an age of Age or more.
type span struct {
	From time.Time     `json:"from"`
	To   time.Time     `json:"to"`
	Age  time.Duration `json:"ageNs"`
}

// ledger is the read ledger (the record's JSON shape).
type ledger struct {
	// Floor: every stamp below it was read at every promised age, or lies
	// before the first sync's start. Spans lie above it, sorted, disjoint;
	// what no span covers above it is unread.
	Floor time.Time `json:"floor"`
	// FloorAge is the age every stamp below the floor was read at (each
	// promised age up to it): a promise widened past it owes the stamps
	// below the floor that can still get such a change (raise). 0 in a
	// record of an earlier version: the top age promised when loaded.
	FloorAge time.Duration `json:"floorAgeNs,omitempty"`
	Spans    []span        `json:"spans,omitempty"`
}

// sec truncates to the second (the stamps' resolution), dropping any
// monotonic reading and location.
func sec(t time.Time) time.Time { return t.Truncate(time.Second).UTC().Round(0) }

// ceilSec is the first whole second at or after t.
func ceilSec(t time.Time) time.Time {
	s := sec(t)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return s
}

// readSpan is the stretch [from, to) of whole seconds a verified read of
// the window [lo, hi] (both ends included, as the service's between:)
// covers.
func readSpan(lo, hi time.Time) (from, to time.Time) {
	return ceilSec(lo), sec(hi).Add(time.Second)
}

// quantize is the largest level at or below age (levels ascending), 0
// when it is below them all: ages between the levels serve no promise, and
// equal ages merge.
func quantize(age time.Duration, levels []time.Duration) time.Duration {
	q := time.Duration(0)
	for _, l := range levels {
		if age >= l {
			q = l
		}
	}
	return q
}

// record notes a verified read of the window [lo, hi] that began when the
// watermark was at ref, under the promised ages levels
// (ascending): a stamp x in it was read at an age of ref - x or more. A
// stamp already read at a greater age keeps it.
func (l *ledger) record(lo, hi, ref time.Time, levels []time.Duration) {
	from, to := readSpan(lo, hi)
	if !from.Before(to) {
		return
	}
	from = maxTime(from, l.Floor)
	// A stamp's second x is claimed at ref - (x + 1s): a change stamped in
	// it that became visible when the watermark reached ref itself (the
	// read may have come first) is not claimed. Cut at each level's
	// boundary: the second x reached age P iff x + 1s <= ref - P.
	cuts := []time.Time{from, to}
	for _, p := range levels {
		if c := sec(ref.Add(-p)); c.After(from) && c.Before(to) {
			cuts = append(cuts, c)
		}
	}
	slices.SortFunc(cuts, time.Time.Compare)
	cuts = slices.CompactFunc(cuts, time.Time.Equal)
	for i := 0; i+1 < len(cuts); i++ {
		a, b := cuts[i], cuts[i+1]
		l.overlay(span{From: a, To: b, Age: quantize(ref.Sub(b), levels)})
	}
	l.compact(levels)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// overlay lays n over the spans: each stamp keeps the greater age.
func (l *ledger) overlay(n span) {
	if !n.From.Before(n.To) {
		return
	}
	bounds := []time.Time{n.From, n.To}
	for _, s := range l.Spans {
		bounds = append(bounds, s.From, s.To)
	}
	slices.SortFunc(bounds, time.Time.Compare)
	bounds = slices.CompactFunc(bounds, time.Time.Equal)
	out := make([]span, 0, len(l.Spans)+2)
	for i := 0; i+1 < len(bounds); i++ {
		a, b := bounds[i], bounds[i+1]
		age, ok := time.Duration(0), false
		if !a.Before(n.From) && !b.After(n.To) {
			age, ok = n.Age, true
		}
		for _, s := range l.Spans {
			if !a.Before(s.From) && !b.After(s.To) && (!ok || s.Age > age) {
				age, ok = s.Age, true
			}
		}
		if ok {
			out = appendSpan(out, span{From: a, To: b, Age: age})
		}
	}
	l.Spans = out
}

// appendSpan appends s, merged with the last span when they touch at the
// same age.
func appendSpan(out []span, s span) []span {
	if n := len(out); n > 0 && out[n-1].To.Equal(s.From) && out[n-1].Age == s.Age {
		out[n-1].To = s.To
		return out
	}
	return append(out, s)
}

// compact moves the floor over the lowest spans read at every promised
// age, and keeps at most maxSpans: touching spans merge at the lower age,
// then the lowest are forgotten (their stamps owed again).
func (l *ledger) compact(levels []time.Duration) {
	top := time.Duration(0)
	if len(levels) > 0 {
		top = levels[len(levels)-1]
	}
	for len(l.Spans) > 0 && !l.Spans[0].From.After(l.Floor) && l.Spans[0].Age >= top && top > 0 {
		if l.Spans[0].To.After(l.Floor) {
			l.FloorAge = min(l.FloorAge, l.Spans[0].Age)
		}
		l.Floor = maxTime(l.Floor, l.Spans[0].To)
		l.Spans = l.Spans[1:]
	}
	for i := 0; len(l.Spans) > maxSpans && i+1 < len(l.Spans); {
		if a, b := l.Spans[i], l.Spans[i+1]; a.To.Equal(b.From) {
			l.Spans[i] = span{From: a.From, To: b.To, Age: min(a.Age, b.Age)}
			l.Spans = slices.Delete(l.Spans, i+1, i+2)
			continue
		}
		i++
	}
	if n := len(l.Spans); n > maxSpans {
		l.Spans = slices.Clone(l.Spans[n-maxSpans:])
	}
}

// owed returns the lowest stretch [from, to) below upto (exclusive) not yet
// read at age p: what a re-read at age p reads next. ok is false when
// everything below upto was read at p or more.
func (l *ledger) owed(p time.Duration, upto time.Time) (from, to time.Time, ok bool) {
	cur := l.Floor
	for _, s := range l.Spans {
		if !cur.Before(upto) {
			return time.Time{}, time.Time{}, false
		}
		if cur.Before(s.From) {
			// A gap: unread. It ends where a span read at p begins.
			return cur, l.owedEnd(p, cur, upto), true
		}
		if s.Age < p && s.To.After(cur) {
			return maxTime(cur, s.From), l.owedEnd(p, maxTime(cur, s.From), upto), true
		}
		cur = maxTime(cur, s.To)
	}
	if cur.Before(upto) {
		return cur, upto, true
	}
	return time.Time{}, time.Time{}, false
}

// window is the next window [lo, hi] (both ends included) a read at age
// p reads: the lowest owed stretch at or below the stamp upto.
func (l *ledger) window(p time.Duration, upto time.Time) (lo, hi time.Time, ok bool) {
	from, to, ok := l.owed(p, sec(upto).Add(time.Second))
	if !ok {
		return time.Time{}, time.Time{}, false
	}
	return from, to.Add(-time.Second), true
}

// owedEnd is where the owed stretch starting at from ends: at the first
// span read at p or more above it, or at upto.
func (l *ledger) owedEnd(p time.Duration, from, upto time.Time) time.Time {
	for _, s := range l.Spans {
		if s.To.After(from) && s.Age >= p && s.From.After(from) {
			return minTime(s.From, upto)
		}
	}
	return upto
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// overdue is how long the oldest stamp still owed a read at one of the
// promised ages has been due: a stamp x is due at age p once the
// reference (the watermark) has passed x + p. 0 when nothing is due.
func (l *ledger) overdue(levels []time.Duration, ref time.Time) time.Duration {
	worst := time.Duration(0)
	for _, p := range levels {
		upto := sec(ref.Add(-p))
		if from, _, ok := l.owed(p, upto); ok {
			worst = max(worst, upto.Sub(from))
		}
	}
	return worst
}

// validate bounds a restored ledger by what the service's own clock
// evidence vouches for (bound: the stamp evidence, or the watermark when
// none is known; never the local clock); it reports whether anything was
// cut.
//
// A span at age A claims that a read that began when the watermark was at
// To + A or later read it (record: the second x reaches A iff x + 1s <= ref - A).
// Every read begins at a watermark, and the watermark never passes the
// stamp evidence (bounded), so no read began above bound: a span with
// To + A > bound, a floor above it or a floor age beyond it, is a claim no
// read made (a damaged record, a file copied from another shop) and is
// cut to what bound allows.
//
// A span at age 0 is not such a claim, and is kept wherever it lies: it
// says a stretch was read at no promised age, which owes every promised
// age (all are above 0: owed treats it as unread), so it can never count
// a read the service did not make as done. Such spans lie above the
// evidence in a healthy ledger: a sweep's window ends at the Date minus
// settle when that is later than the evidence (a Date ahead of the
// stamping clock; a quiet shop whose newest stamp was served a while
// after it was made; a window ending at the evidence's second, claimed
// whole), and what it read above its watermark is recorded at age 0.
func (l *ledger) validate(bound time.Time) bool {
	cut := false
	if b := sec(bound).Add(time.Second); l.Floor.After(b) {
		l.Floor, cut = b, true
	}
	if most := max(bound.Sub(l.Floor), 0); l.FloorAge > most || l.FloorAge < 0 {
		l.FloorAge, cut = min(max(l.FloorAge, 0), most), true
	}
	out := l.Spans[:0]
	for _, s := range l.Spans {
		if !s.From.Before(s.To) || s.From.Before(l.Floor) && !s.To.After(l.Floor) || s.Age < 0 {
			cut = true
			continue
		}
		if s.From.Before(l.Floor) {
			s.From, cut = l.Floor, true
		}
		if most := bound.Sub(s.To); s.Age > 0 && s.Age > most {
			s.Age, cut = max(most, 0), true
		}
		if len(out) > 0 && out[len(out)-1].To.After(s.From) {
			cut = true
			continue // overlapping: damaged
		}
		out = append(out, s)
	}
	l.Spans = out
	return cut
}

// relevel follows a change of a promised age from old to new: what was
// read at the old age kept the promise in force when it was read, and
// keeps the new one where no change can become visible within the new
// promise any more: at stamps below horizon (the watermark minus the new
// age); above it, a widened promise is owed anew (the promise follows the
// measured late arrivals going forward, and a widening does not send the
// re-reads back over the history). A narrowing holds everywhere. Never up
// to or past another age promised before the change (before): the
// changes already visible within that promise (a probe's) were owed a
// read at it, which the old age's did not make.
func (l *ledger) relevel(old, new time.Duration, before []time.Duration, horizon time.Time) {
	if old == new || old <= 0 || new <= 0 {
		return
	}
	for _, p := range before {
		if p > old && p <= new {
			return
		}
	}
	if new < old {
		horizon = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	horizon = sec(horizon)
	out := make([]span, 0, len(l.Spans)+1)
	for _, s := range l.Spans {
		if s.Age != old || !s.From.Before(horizon) {
			out = appendSpan(out, s)
			continue
		}
		if s.To.After(horizon) {
			out = appendSpan(out, span{From: s.From, To: horizon, Age: new})
			out = appendSpan(out, span{From: horizon, To: s.To, Age: old})
			continue
		}
		s.Age = new
		out = appendSpan(out, s)
	}
	l.Spans = out
}

// raise follows a promise widened to top, the greatest age now promised,
// past the floor's age: below horizon (the watermark minus top) what was
// read kept the promise in force when it was read (relevel); above it, the
// stamps below the floor are owed a read at top, as the spans are: the
// floor moves down to horizon over a span at the age it holds.
func (l *ledger) raise(top time.Duration, horizon time.Time) {
	if top <= l.FloorAge {
		return
	}
	horizon = sec(horizon)
	if l.Floor.After(horizon) {
		l.Spans = append([]span{{From: horizon, To: l.Floor, Age: l.FloorAge}}, l.Spans...)
		l.Floor = horizon
	}
	l.FloorAge = top
}

// rewind takes a clock of the service that went back by jump: what was
// read before was read that much earlier on the clock that stamps the new
// changes, so every age shrinks by jump, and the floor moves down by it
// (the stamps below it are owed again at the new ages).
func (l *ledger) rewind(jump time.Duration, levels []time.Duration) {
	if jump <= 0 {
		return
	}
	l.Floor = sec(l.Floor.Add(-jump))
	for i := range l.Spans {
		l.Spans[i].Age = quantize(l.Spans[i].Age-jump, levels)
	}
	l.compact(levels)
}
