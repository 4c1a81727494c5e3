package plenty

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// The records that bind the shop's calls (waits, sessions) are kept by the
// whole hot-standby group, not only by the replica that wrote them
// (package replica): a replica merges the group's copy with its own, so
// that any replica may add what it learned without undoing another's. A
// merge only binds more: a wait only lengthens. The group's copy is first
// moved onto the reader's clock (Shift*: the writer's and the reader's
// wall clocks differ; the replica bounds the difference by the NATS
// server's clock, never shortening a wait).

// ShiftWaits moves the local-clock times of a "waits" record by d (the
// service's own times, Reset and ServerAt, stay).
func ShiftWaits(raw json.RawMessage, d time.Duration) (json.RawMessage, error) {
	var r waitsRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("record %s: %w", WaitsRecord, err)
	}
	for i := range r.Waits {
		r.Waits[i].Until = shiftTime(r.Waits[i].Until, d)
		r.Waits[i].Measured = shiftTime(r.Waits[i].Measured, d)
	}
	return json.Marshal(r)
}

// MergeWaits combines this replica's "waits" record with the group's (on
// this replica's clock): every wait of either with time left at now, a
// wait that another binds at least as long as itself, from now on, taken
// once (covers: the same answer read twice, or moved onto another
// replica's clock). A group's record that does not decode is an error
// (the caller keeps its own); an own record that does not decode counts
// as none.
func MergeWaits(own, group json.RawMessage, now time.Time) (json.RawMessage, error) {
	var g, o waitsRecord
	if err := json.Unmarshal(group, &g); err != nil {
		return nil, fmt.Errorf("record %s: %w", WaitsRecord, err)
	}
	if len(own) > 0 && json.Unmarshal(own, &o) != nil {
		o = waitsRecord{}
	}
	out := waitsRecord{Waits: []Wait{}}
	for _, w := range append(o.Waits, g.Waits...) {
		if w.Remaining(now) <= 0 || slices.ContainsFunc(out.Waits, func(v Wait) bool { return v.covers(w, now) }) {
			continue
		}
		out.Waits = slices.DeleteFunc(out.Waits, func(v Wait) bool { return w.covers(v, now) })
		out.Waits = append(out.Waits, w)
	}
	return json.Marshal(out)
}

// covers says whether w binds at least as long as v from now on, v being
// the same answer (its reason and the service's times as w's) measured
// no later, with the same length: a copy of v moved later (the replica
// moves the group's copy onto its clock by a bound of the clocks'
// difference, a few milliseconds off each time), or v itself. Once its
// Measured has passed, such a copy ends no sooner by every bound of
// Remaining, on whatever clock both are moved to; before, its bound by a
// reset that reckons from Measured stands still while v's runs down, and
// may end sooner: Remaining at now tells.
func (w Wait) covers(v Wait, now time.Time) bool {
	return w.Reason == v.Reason && w.Why == v.Why && w.Announced == v.Announced &&
		w.Reset.Equal(v.Reset) && w.ServerAt.Equal(v.ServerAt) &&
		w.Until.Sub(w.Measured) == v.Until.Sub(v.Measured) && !w.Measured.Before(v.Measured) &&
		w.Remaining(now) >= v.Remaining(now)
}

// shiftTime moves t by d; the zero time stays zero.
func shiftTime(t time.Time, d time.Duration) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(d)
}
