package poller

import (
	"errors"
	"testing"
	"time"
)

// TestSchedulerSecondLook: what the second look reads after a sweep, by
// the ledger, the split and the density.
func TestSchedulerSecondLook(t *testing.T) {
	const ov = 10 * time.Second
	levels := []time.Duration{ov, probeLate}
	// Split sweeps read [wm-5, wm] every 2.5 s; everything below 0 was read
	// at the overlap's age.
	splitTo := func(last int) *ledger {
		l := &ledger{Floor: at(0)}
		for wm := 0; wm <= last; wm += 2 {
			l.record(at(wm-5), at(wm), at(wm-2), levels)
		}
		return l
	}
	split := func() *ledger { return splitTo(40) }
	cases := []struct {
		name     string
		reads    *ledger
		look     secondLook
		wm       int
		lean     bool // the budget in debt
		ok       bool
		from, to int
	}{
		{"first sync: no ledger", nil, secondLook{split: true}, 40, false, false, 0, 0},
		{"split, a few seconds owed, sparse: waits", split(), secondLook{split: true, density: 1, page: 250}, 20, false, false, 0, 0},
		{"split, most of a page owed: waits", split(), secondLook{split: true, density: 20, page: 250}, 20, false, false, 0, 0},
		{"split, over a page owed: reads a page's worth", split(), secondLook{split: true, density: 20, page: 250}, 25, false, true, 0, 10},
		{"split, secondLookMax owed: reads", split(), secondLook{split: true, density: 1, page: 250}, 40, false, true, 0, 29},
		{"split, two pages' worth owed (the look trails): a page's worth, the rest after the next sweep", split(), secondLook{split: true, density: 20, page: 250}, 33, false, true, 0, 10},
		{"whole overlap: only below the sweeps' reach", split(), secondLook{density: 1, page: 250}, 40, false, false, 0, 0},
		{"lean: a page's worth owed waits for the sweeps", split(), secondLook{split: true, density: 20, page: 250}, 25, true, false, 0, 0},
		{"lean: secondLookMax owed waits", split(), secondLook{split: true, density: 1, page: 250}, 40, true, false, 0, 0},
		{"lean: leanLookMax owed reads", splitTo(70), secondLook{split: true, density: 1, page: 250}, 70, true, true, 0, 59},
		{"lean, not split: what is owed below the sweeps' reach waits", splitTo(70), secondLook{density: 1, page: 250}, 70, true, false, 0, 0},
		{"lean, not split, leanLookMax owed below the sweeps' reach: reads", splitTo(110), secondLook{density: 1, page: 250}, 110, true, true, 0, 69},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := scheduler{look: c.look}
			rd, ok := s.secondLook(c.reads, at(c.wm), ov, c.lean)
			if ok != c.ok || ok && (!rd.from.Equal(at(c.from)) || !rd.to.Equal(at(c.to))) {
				t.Errorf("secondLook = %v..%v %v; want %d..%d %v", rd.from.Sub(lt0), rd.to.Sub(lt0), ok, c.from, c.to, c.ok)
			}
			if ok && (rd.need != ov || rd.maxCalls != 2 || rd.width != nil) {
				t.Errorf("secondLook read %+v; want the overlap's age, 2 calls, the whole window", rd)
			}
		})
	}
}

// TestSchedulerProbe: a probe starts when due, reads what the ledger owes
// at its age slice by slice while there is room, ends when nothing is
// owed up to its end, and ends on an error with its window still owed.
func TestSchedulerProbe(t *testing.T) {
	levels := []time.Duration{10 * time.Second, probeLate}
	now := lt0
	l := &ledger{Floor: at(0)}
	for wm := 0; wm <= 1000; wm += 2 {
		l.record(at(wm-5), at(wm), at(wm-2), levels) // split sweeps: read young only
	}
	var s scheduler
	s.startProbe(false, at(1000), probeLate, true, now)
	if s.probe.on {
		t.Fatal("a probe started before the ledger was loaded")
	}
	s.startProbe(true, at(1000), probeLate, false, now)
	if s.probe.on {
		t.Fatal("a probe started when none was due")
	}
	s.startProbe(true, at(1000), probeLate, true, now)
	if !s.probe.on || !s.probe.to.Equal(at(1000-301)) {
		t.Fatalf("probe %+v; want on, up to the watermark minus 5 min and a second", s.probe)
	}
	if _, run, _ := s.probeSlice(l, probeLate, false, false, 0, now.Add(time.Minute)); run {
		t.Fatal("a slice read without room before probeEvery passed")
	}
	rd, run, done := s.probeSlice(l, probeLate, true, false, 0, now)
	if !run || done || !rd.from.Equal(at(0)) || !rd.to.Equal(at(699)) || rd.maxCalls != 1 || rd.width == nil {
		t.Fatalf("slice %+v run %v done %v; want 0..699, one call, its width carried", rd, run, done)
	}
	if _, run, _ := s.probeSlice(l, probeLate, false, false, 0, now.Add(probeEvery)); !run {
		t.Fatal("no slice after probeEvery without room")
	}
	if _, run, _ := s.probeSlice(l, probeLate, true, true, 0, now.Add(time.Minute)); run {
		t.Fatal("a slice read while the budget is in debt, before probeEvery passed")
	}
	if _, run, _ := s.probeSlice(l, probeLate, true, true, 0, now.Add(probeEvery)); !run {
		t.Fatal("no slice after probeEvery while the budget is in debt")
	}
	if !s.probeRead(l, probeLate, errors.New("5xx")) || s.probe.on {
		t.Fatal("a failed slice did not end the probe")
	}
	if _, _, owed := l.window(probeLate, at(699)); !owed {
		t.Fatal("a failed probe's window is not owed any more")
	}
	s.startProbe(true, at(1000), probeLate, true, now)
	l.record(at(0), at(300), at(1000), levels)
	if s.probeRead(l, probeLate, nil) {
		t.Fatal("the probe ended with its window half read")
	}
	l.record(at(301), at(699), at(1000), levels)
	if !s.probeRead(l, probeLate, nil) || s.probe.on {
		t.Fatal("the probe did not end with its window read")
	}
	if _, _, done := s.probeSlice(l, probeLate, true, false, 0, now); done {
		t.Fatal("a probe that is not on reports done")
	}
}

// TestYields: a re-read yields to the sweeps only while the budget is in
// debt, and never longer than its bound.
func TestYields(t *testing.T) {
	for _, c := range []struct {
		lean   bool
		waited time.Duration
		want   bool
	}{
		{false, 0, false},
		{false, time.Hour, false},
		{true, 0, true},
		{true, leanLookMax - time.Second, true},
		{true, leanLookMax, false},
		{true, time.Hour, false},
	} {
		if got := yields(c.lean, c.waited, leanLookMax); got != c.want {
			t.Errorf("yields(lean %v, waited %v) = %v; want %v", c.lean, c.waited, got, c.want)
		}
	}
}
