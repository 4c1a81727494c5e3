package diff

import (
	"testing"
	"time"
)

// A standby's snapshot comes from the stream: an event's after. A change
// of updatedAt alone is stored by the active without an event, so the
// standby keeps the older updatedAt. After a takeover the overlap reads
// such an order again: that re-read must emit nothing, and the next real
// transition must get the id the old active would have given it (the id
// hashes before.updatedAt).
func TestStandbyTakeoverSilentUpdate(t *testing.T) {
	opt := Options{Baseline: mustTime(t, "2026-11-01T00:00:00Z")}
	e1 := entry(t, `updatedAt="2026-11-20T10:00:00+01:00"`, `statusId=5`)
	e2 := entry(t, `updatedAt="2026-11-20T10:05:00+01:00"`, `statusId=5`) // updatedAt only
	e3 := entry(t, `updatedAt="2026-11-20T10:09:00+01:00"`, `statusId=6`) // a transition

	// The active: the order known at e1 (its event in the stream), then
	// e2 silently, then e3.
	s1 := StateOf(e1)
	a2, store, evs := Decide(&s1, e2, opt)
	if !store || len(evs) != 0 {
		t.Fatalf("active, e2: store %v, %d events; want a silent store", store, len(evs))
	}
	_, _, activeEvs := Decide(&a2, e3, opt)

	// The standby: its state of the order is the stream's (e1 through an
	// encoded event), so it lacks e2.
	ev := Event{ID: "x", Type: Created, OrderID: e1.ID, After: s1, Order: e1.Raw}
	d, err := DecodeEvent(Encode(nil, ev, "src"))
	if err != nil {
		t.Fatal(err)
	}
	b1 := d.After
	if !b1.Same(s1) {
		t.Fatalf("the mirrored state %+v differs from the active's %+v", b1, s1)
	}
	// After the takeover the overlap re-reads e2: stored, no event.
	b2, store, evs := Decide(&b1, e2, opt)
	if !store || len(evs) != 0 || !b2.Same(a2) {
		t.Fatalf("standby, e2 re-read: store %v, %d events, state %+v; want a silent store of the active's state", store, len(evs), b2)
	}
	_, _, standbyEvs := Decide(&b2, e3, opt)
	if len(activeEvs) == 0 || len(standbyEvs) != len(activeEvs) {
		t.Fatalf("e3: %d events on the active, %d on the standby", len(activeEvs), len(standbyEvs))
	}
	for i := range activeEvs {
		if activeEvs[i].ID != standbyEvs[i].ID {
			t.Errorf("event %d (%s): id %s on the standby, %s on the active: a copy from a demoted active would not be dropped",
				i, activeEvs[i].Type, standbyEvs[i].ID, activeEvs[i].ID)
		}
	}

	// Outside the overlap (e2 older than watermark - overlap) the standby
	// never re-reads e2: its event for e3 names the older updatedAt in
	// before, a different id. Only this replica sees e3 (it happens after
	// the takeover; the old active is fenced), so nothing is doubled; the
	// snapshot dumps (every 5 minutes) bound how old such a state can be.
	_, _, staleEvs := Decide(&b1, e3, opt)
	if len(staleEvs) != len(activeEvs) || staleEvs[0].Before.StatusID.Canonical() != "5" || staleEvs[0].After.StatusID.Canonical() != "6" {
		t.Errorf("the transition from the stale state: %+v", staleEvs)
	}
	if !staleEvs[0].Before.UpdatedAt.Equal(time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("before.updatedAt %v, want the mirrored one", staleEvs[0].Before.UpdatedAt)
	}
}
