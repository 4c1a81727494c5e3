package poller

import (
	"testing"
	"time"
)

var e0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// TestEvidenceBound: the bound is the newest stamp, carried forward on the
// local clock; an older stamp does not lower it, a local reading before
// the last one carries nothing, and reset forgets what was before.
func TestEvidenceBound(t *testing.T) {
	var e evidence
	if _, ok := e.now(e0); ok {
		t.Fatal("a bound before any stamp")
	}
	if e.observe(time.Time{}, e0) {
		t.Error("a zero stamp moved the bound")
	}
	local := e0.Add(time.Hour) // the local clock is an hour off: only durations count
	if !e.observe(e0.Add(-30*time.Second), local) {
		t.Fatal("the first stamp did not set the bound")
	}
	at := func(d time.Duration) time.Time { b, _ := e.now(local.Add(d)); return b }
	if got := at(10 * time.Second); !got.Equal(e0.Add(-20 * time.Second)) {
		t.Errorf("10s later: %v", got)
	}
	if got := at(-10 * time.Second); !got.Equal(e0.Add(-30 * time.Second)) {
		t.Errorf("a local reading before the stamp was seen: %v; want the stamp", got)
	}
	// A quiet shop: no new stamp, the bound still moves with the clock.
	if got := at(time.Hour); !got.Equal(e0.Add(time.Hour - 30*time.Second)) {
		t.Errorf("an hour later: %v", got)
	}
	// An older stamp (an order re-read in the overlap) does not lower it.
	if e.observe(e0.Add(-time.Hour), local.Add(20*time.Second)) {
		t.Error("an older stamp moved the bound")
	}
	if got := at(20 * time.Second); !got.Equal(e0.Add(-10 * time.Second)) {
		t.Errorf("after an older stamp: %v", got)
	}
	// A newer one raises it.
	if !e.observe(e0.Add(25*time.Second), local.Add(30*time.Second)) {
		t.Error("a newer stamp did not move the bound")
	}
	if got := at(40 * time.Second); !got.Equal(e0.Add(35 * time.Second)) {
		t.Errorf("after a newer stamp: %v", got)
	}
	// The service's clock went back: the old stamps are forgotten.
	e.reset(e0.Add(-2*time.Hour), local.Add(time.Minute))
	if got := at(time.Minute + time.Second); !got.Equal(e0.Add(-2*time.Hour + time.Second)) {
		t.Errorf("after reset: %v", got)
	}
}

// TestClockRecordCarried: over a restart the bound is carried by the
// smaller of the wall clock's and the Date's elapsed time; a clock that went
// back carries nothing; without a Date the wall clock alone.
func TestClockRecordCarried(t *testing.T) {
	var e evidence
	e.observe(e0, e0.Add(5*time.Second)) // stamp e0 seen at local e0+5s
	saved := e0.Add(65 * time.Second)    // saved a minute later
	rec, ok := e.record(saved, e0.Add(70*time.Second))
	if !ok || !rec.Bound.Equal(e0.Add(time.Minute)) || !rec.Stamp.Equal(e0) || !rec.Date.Equal(e0.Add(70*time.Second)) {
		t.Fatalf("record %+v", rec)
	}
	for _, c := range []struct {
		name        string
		local, date time.Time
		want        time.Time
	}{
		{"both agree: 10s", saved.Add(10 * time.Second), rec.Date.Add(10 * time.Second), rec.Bound.Add(10 * time.Second)},
		{"Date 2h ahead", saved.Add(10 * time.Second), rec.Date.Add(2*time.Hour + 10*time.Second), rec.Bound.Add(10 * time.Second)},
		{"Date 2h behind", saved.Add(10 * time.Second), rec.Date.Add(-2*time.Hour + 10*time.Second), rec.Bound},
		{"local clock 2h ahead", saved.Add(2*time.Hour + 10*time.Second), rec.Date.Add(10 * time.Second), rec.Bound.Add(10 * time.Second)},
		{"local clock went back", saved.Add(-time.Hour), rec.Date.Add(10 * time.Second), rec.Bound},
		{"no Date now", saved.Add(10 * time.Second), time.Time{}, rec.Bound.Add(10 * time.Second)},
	} {
		got, ok := rec.carried(c.local, c.date)
		if !ok || !got.Equal(c.want) {
			t.Errorf("%s: carried %v, want %v", c.name, got, c.want)
		}
		var n evidence
		if !n.load(rec, c.local, c.date) {
			t.Errorf("%s: not loaded", c.name)
		}
		if b, _ := n.now(c.local.Add(time.Second)); !b.Equal(c.want.Add(time.Second)) {
			t.Errorf("%s: loaded bound a second later %v", c.name, b)
		}
	}
	if _, ok := (clockState{}).carried(saved, e0); ok {
		t.Error("an empty record carried a bound")
	}
	var none evidence
	if _, ok := none.record(saved, e0); ok {
		t.Error("a record without evidence")
	}
}
