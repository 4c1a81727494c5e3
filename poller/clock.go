package poller

import (
	"context"
	"fmt"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/state"
)

// The watermark is vouched for by the data, not by a clock reading: the
// Date header can come from a front-end with a wrong clock, for seconds or
// for hours; the updatedAt stamps in the service's answers come from the
// clock that stamps the changes. A stamp served proves that the service's
// clock had reached it; carried forward on the local monotonic clock since
// it was seen, it stays a lower bound of the service's clock. The watermark
// never passes that bound minus settle, so no reading of the Date header,
// ahead or behind, for any length of time, puts it where a later change
// could land below it.

// clockRecord is the record (state.Store) that carries the stamp evidence
// over a restart. A missing or unreadable record is "nothing known": the
// first sweep then learns the evidence from the stamps it reads.
const clockRecord = "clock"

// clockProbeSpan is how far back from the Date the sweep looks for changes
// it has not seen when the Date says the service's clock lies below the
// window (a clock set back): it covers the minute the client distrusts a
// new Date before it follows it, with room for a sweep interval.
const clockProbeSpan = 5 * time.Minute

// evidence is the newest updatedAt the service has served, carried forward
// on the local monotonic clock since it was seen: a lower bound of the
// service's (stamping) clock.
type evidence struct {
	have  bool
	base  time.Time // lower bound of the service's clock at the local reading at
	at    time.Time // local clock (with its monotonic reading in a process)
	stamp time.Time // the newest stamp served
	seen  time.Time // local wall clock when it was seen
}

// now is the bound at the local reading local; ok is false before any
// stamp. A local reading before at (it cannot be, on the monotonic clock)
// carries nothing.
func (e *evidence) now(local time.Time) (time.Time, bool) {
	if !e.have {
		return time.Time{}, false
	}
	return e.base.Add(max(local.Sub(e.at), 0)), true
}

// observe takes a stamp served at the local reading local; it says whether
// the bound moved up.
func (e *evidence) observe(stamp, local time.Time) bool {
	if stamp.IsZero() {
		return false
	}
	cur, ok := e.now(local)
	if ok && !stamp.After(cur) {
		return false
	}
	e.have, e.base, e.at, e.stamp, e.seen = true, stamp, local, stamp, local
	return true
}

// reset forgets every earlier stamp: the service's clock went back, and
// the stamps of before stand for a time it has not reached again.
func (e *evidence) reset(stamp, local time.Time) {
	*e = evidence{}
	e.observe(stamp, local)
}

// clockState is the JSON of the clock record.
type clockState struct {
	// Stamp is the newest updatedAt the service had served, SeenAt the
	// local wall clock when it was seen (both for the operator).
	Stamp  time.Time `json:"stamp"`
	SeenAt time.Time `json:"seenAt"`
	// Bound is Stamp carried forward on the monotonic clock to SavedAt
	// (local wall clock): a lower bound of the service's clock then.
	Bound   time.Time `json:"bound"`
	SavedAt time.Time `json:"savedAt"`
	// Date is what the Date headers said the service's clock was at
	// SavedAt (zero: not known): it caps the time carried over a restart.
	Date time.Time `json:"date,omitzero"`
}

// record is the evidence as saved at the local reading local, with the
// Date estimate date (zero when not known).
func (e *evidence) record(local, date time.Time) (clockState, bool) {
	b, ok := e.now(local)
	if !ok {
		return clockState{}, false
	}
	return clockState{Stamp: e.stamp.UTC(), SeenAt: e.seen.Round(0).UTC(), Bound: b.UTC(), SavedAt: local.Round(0).UTC(), Date: date.UTC()}, true
}

// carried is the bound a record vouches for in a new process at the local
// wall clock local, with the Date estimate date (zero when not known). Only
// the wall clock survives a restart, and it can have been stepped: the
// time carried is the smaller of what the wall clock and what the Date
// headers say has passed since the record was saved (a clock that went
// back carries nothing; one that jumped ahead is capped by the Date, and a
// Date that jumped ahead by the wall clock). Both would have to err ahead
// together to carry the bound too far.
func (r clockState) carried(local, date time.Time) (time.Time, bool) {
	if r.Bound.IsZero() || r.SavedAt.IsZero() {
		return time.Time{}, false
	}
	d := local.Round(0).Sub(r.SavedAt)
	if !r.Date.IsZero() && !date.IsZero() {
		d = min(d, date.Sub(r.Date))
	}
	return r.Bound.Add(max(d, 0)), true
}

// load starts the evidence from a record at the local reading local (it
// is kept when it is newer).
func (e *evidence) load(r clockState, local, date time.Time) bool {
	b, ok := r.carried(local, date)
	if !ok {
		return false
	}
	if cur, ok := e.now(local); ok && !b.After(cur) {
		return false
	}
	e.have, e.base, e.at, e.stamp, e.seen = true, b, local, r.Stamp, r.SeenAt
	return true
}

// latestDate is the earlier of the Date estimate now and what the latest
// Date headers say: a Date that jumped back is not waited for (the stamps
// keep the window where it belongs if it is wrong, and a clock set back is
// looked for at once); one that jumped ahead is, for a minute.
func (p *Poller) latestDate(now time.Time) time.Time {
	if d, ok := p.client.DateNow(); ok && d.Before(now) {
		return d
	}
	return now
}

// window is the sweep's upper bound hi, from the Date estimate date: the
// Date estimate minus settle (a hint: a clock that is right shows changes
// as soon as they settle), or the stamp evidence when that is later (a
// Date behind): the evidence is a lower bound of the service's clock, so
// the window never reaches into its future, and it never falls behind
// (it grows with the monotonic clock and jumps with every newer stamp),
// so changes go on being read however long the Date is wrong. The
// watermark stays below the evidence minus settle whatever hi is
// (bounded); before any stamp is known, the Date is all there is.
func (p *Poller) window(date time.Time) time.Time {
	hi := date.Add(-p.cfg.Settle).Truncate(time.Second)
	if ts, ok := p.ev.now(p.cfg.Now()); ok && ts.Truncate(time.Second).After(hi) {
		hi = ts.Truncate(time.Second)
	}
	return hi
}

// bounded is the watermark a verified slice ending at mark may commit:
// mark, capped at the newest stamp served minus settle; nil when no stamp
// has been served (the watermark waits). The clock record goes in the same
// transaction.
func (p *Poller) bounded(mark time.Time) (*time.Time, []state.Record) {
	local := p.cfg.Now()
	ts, ok := p.ev.now(local)
	if !ok {
		return nil, nil
	}
	if b := ts.Add(-p.cfg.Settle).Truncate(time.Second); mark.After(b) {
		mark = b
	}
	var recs []state.Record
	if rec, ok := p.evidenceRecord(local); ok {
		recs = []state.Record{{Name: clockRecord, Value: rec}}
	}
	return &mark, recs
}

// evidenceRecord is the clock record at the local reading local.
func (p *Poller) evidenceRecord(local time.Time) (clockState, bool) {
	date, _ := p.client.ServerNow()
	return p.ev.record(local, date)
}

// loadClock reads the clock record once per process: the evidence of the
// process before, carried over the restart (see clockState.carried). date
// is the Date estimate of this process, maybe skewed: the record bounds
// the watermark however far ahead it says the service's clock is.
func (p *Poller) loadClock(date time.Time) {
	if p.evLoaded {
		return
	}
	p.evLoaded = true
	var r clockState
	found, err := p.store.LoadRecord(clockRecord, &r)
	if err != nil {
		p.log.Warn("the clock record in the state file is unreadable: nothing known, the stamps the sweep reads bound the watermark", "err", err)
		return
	}
	local := p.cfg.Now()
	if !found || !p.ev.load(r, local, date) {
		return
	}
	b, _ := p.ev.now(local)
	p.log.Info("clock evidence from the state file: the watermark stays below the newest stamp served, carried forward over the restart",
		"stamp", r.Stamp.Format(time.RFC3339), "seen_at", r.SeenAt.Format(time.RFC3339), "bound", b.Format(time.RFC3339),
		"date", date.UTC().Format(time.RFC3339))
}

// probeBack runs when the latest Date minus settle lies below the window
// (see latestDate): a Date behind, or the service's clock set back, whose new stamps land
// below the watermark where no sweep would read them. It reads one page of
// the span before the Date and looks for entries the sweeps have not seen
// (in scope, not in the snapshot with that updatedAt): only a clock set
// back puts them there. Then the stamps of before stand for a time the
// service has not reached again: they are forgotten, the evidence starts
// again from the new stamps, and the watermark is rewound before the span
// (re-reading is idempotent). It returns the rewound watermark (zero: the
// Date was wrong, nothing done).
//
// It reads the last clockProbeNear below the Date first, then the whole
// span: the first page of a busy shop's span (its lowest ids) holds only
// orders the sweeps have seen, while a clock set back a moment ago stamps
// its new changes right below the Date.
func (s *sweep) probeBack(ctx context.Context, date, hiDate, watermark time.Time) (time.Time, error) {
	p := s.p
	from := hiDate.Add(-clockProbeSpan)
	var newest time.Time
	unseen := 0
	for _, span := range []time.Duration{clockProbeNear, clockProbeSpan} {
		n, at, err := s.unseenBelow(ctx, hiDate.Add(-span), hiDate)
		if err != nil {
			return time.Time{}, err
		}
		if n > 0 {
			unseen, newest = n, at
			break
		}
	}
	if unseen == 0 {
		p.log.Debug("the Date says the service's clock lies below the window; no change there the sweeps have not seen: the stamps keep the window",
			"date", date.UTC().Format(time.RFC3339), "watermark", watermark.Format(time.RFC3339))
		return time.Time{}, nil
	}
	return s.rewindBack(date, hiDate, from, watermark, newest, unseen)
}

// clockProbeNear is the part right below the Date probeBack reads first.
const clockProbeNear = 10 * time.Second

// unseenBelow reads the first page of [from, to] and counts the entries in
// scope the sweeps have not seen (not in the snapshot with that
// updatedAt), with the newest stamp among them.
func (s *sweep) unseenBelow(ctx context.Context, from, to time.Time) (unseen int, newest time.Time, err error) {
	p := s.p
	page, err := s.fetch(ctx, from, to, 1, 0)
	if err != nil {
		return 0, time.Time{}, err
	}
	ids := s.ids[:0]
	for _, o := range page.Orders {
		ids = append(ids, o.ID)
	}
	s.ids = ids
	prev := append(s.prev[:0], make([]*diff.State, len(ids))...)
	s.prev = prev
	if err := p.store.Lookup(ids, prev); err != nil {
		return 0, time.Time{}, err
	}
	for i, o := range page.Orders {
		st := diff.StateOf(o)
		if !p.cfg.ScopeLocal.Match(o.ID, &st) || (prev[i] != nil && prev[i].UpdatedAt.Equal(o.UpdatedAt.Time)) {
			continue
		}
		unseen++
		if o.UpdatedAt.After(newest) {
			newest = o.UpdatedAt.Time
		}
	}
	return unseen, newest, nil
}

// rewindBack forgets the earlier stamps and rewinds the watermark to from
// (probeBack found unseen changes below the Date: the service's clock went
// back).
func (s *sweep) rewindBack(date, hiDate, from, watermark, newest time.Time, unseen int) (time.Time, error) {
	p := s.p
	local := p.cfg.Now()
	p.ev.reset(newest, local)
	if rec, ok := p.evidenceRecord(local); ok {
		if err := p.store.SaveRecord(clockRecord, rec); err != nil {
			return time.Time{}, err
		}
	}
	if err := p.store.RewindWatermark(from); err != nil {
		return time.Time{}, fmt.Errorf("rewind the watermark: %w", err)
	}
	jump := hiDate.Sub(watermark)
	p.log.Error("the service's clock went back: changes stamped below the watermark; the earlier stamps are forgotten and the watermark is rewound (re-reading is idempotent)",
		"watermark", watermark.Format(time.RFC3339), "rewound_to", from.Format(time.RFC3339), "unseen", unseen,
		"newest_unseen", newest.Format(time.RFC3339), "date", date.UTC().Format(time.RFC3339), "jump", jump.Round(time.Second).String())
	if p.cfg.OnClockJump != nil {
		p.cfg.OnClockJump(jump, "rewound")
	}
	return from, nil
}
