package poller

import (
	"errors"
	"testing"
	"time"
)

var errTest = errors.New("a sweep that failed")

// TestSplitPays: splitting the overlap's re-read off pays where the overlap's
// orders cost a sweep a page more (a busy shop), not where a sweep's window
// fits one page anyway (a quiet or a moderate shop), nor where neither way
// keeps within the rate.
func TestSplitPays(t *testing.T) {
	const rate = 0.25 * 166000 / 86400 // 0.48 calls a second
	for _, tc := range []struct {
		name     string
		rho      float64 // orders a second
		overlap  time.Duration
		interval time.Duration
		rate     float64
		want     bool
	}{
		{name: "quiet shop", rho: 0.01, overlap: 10 * time.Second, rate: rate},
		{name: "moderate shop", rho: 5, overlap: 10 * time.Second, rate: rate},
		{name: "15 a second: the overlap still fits the page", rho: 15, overlap: 10 * time.Second, rate: rate},
		{name: "18 a second: it does not", rho: 18, overlap: 10 * time.Second, rate: rate, want: true},
		{name: "busy shop: 20 a second", rho: 20, overlap: 10 * time.Second, rate: rate, want: true},
		{name: "a wide overlap (late arrivals)", rho: 3, overlap: 2 * time.Minute, rate: rate, want: true},
		{name: "more than the rate can read either way", rho: 500, overlap: 10 * time.Second, rate: rate},
		{name: "explicit interval, busy", rho: 20, overlap: 10 * time.Second, interval: 2 * time.Second, want: true},
		{name: "explicit interval, quiet", rho: 0.5, overlap: 10 * time.Second, interval: 2 * time.Second},
		{name: "no rate known", rho: 20, overlap: 10 * time.Second},
		{name: "nothing measured", overlap: 10 * time.Second, rate: rate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fresh := min(freshOverlap, tc.overlap/2)
			const settle = 2 * time.Second
			if got := splitPays(tc.rho, tc.overlap+settle, fresh+settle, 250, tc.rate, tc.interval); got != tc.want {
				t.Errorf("splitPays(%g/s, overlap %v) = %v; want %v", tc.rho, tc.overlap, got, tc.want)
			}
		})
	}
	if splitPays(20, 4*time.Second, 4*time.Second, 250, rate, 0) {
		t.Error("a fresh re-read as wide as the overlap split")
	}
}

// TestSecondLookBookkeeping: a process's first sweep measures no density
// (it may be a catch-up); the split follows the density measured; the
// second look is due once its owed window holds most of a page or
// secondLookMax, or at once when the sweeps stopped splitting.
func TestSecondLookBookkeeping(t *testing.T) {
	const ov = 10 * time.Second
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	l := &secondLook{}
	if got := l.reread(ov, 2*time.Second, 0, 0.48, true); got != ov {
		t.Fatalf("first sweep reads %v; want the overlap", got)
	}
	l.swept(Stats{Lo: t0.Add(-70 * time.Second), Hi: t0, Watermark: t0, Entries: 1400}, nil, ov, 250)
	if l.density != 0 || l.page != 250 {
		t.Fatalf("after the first sweep: density %g page %d", l.density, l.page)
	}
	l.swept(Stats{Lo: t0.Add(-ov - 3*time.Second), Hi: t0.Add(2 * time.Second), Watermark: t0, Entries: 300}, nil, ov, 250)
	if l.density != 20 {
		t.Fatalf("after the second sweep: density %g", l.density)
	}
	if got := l.reread(ov, 2*time.Second, 0, 0.48, true); got != freshOverlap || !l.split {
		t.Fatalf("busy: the next sweep reads %v (split %v); want %v", got, l.split, freshOverlap)
	}
	from := t0.Add(-ov)
	if l.due(from, from.Add(2*time.Second)) {
		t.Fatal("second look due for 3 s (60 orders)")
	}
	if !l.due(from, from.Add(11*time.Second)) {
		t.Fatal("second look not due for 12 s (240 orders, most of a page)")
	}
	if !l.due(from, from.Add(secondLookMax)) {
		t.Fatal("second look not due at secondLookMax")
	}
	// A failed sweep measures nothing.
	l.swept(Stats{Lo: t0, Hi: t0.Add(time.Minute), Watermark: t0.Add(time.Minute), Entries: 100000}, errTest, ov, 250)
	if l.density != 20 {
		t.Fatalf("a failed sweep moved the density to %g", l.density)
	}
	// Quiet again: sweeps read the whole overlap and what is owed is due at once.
	l.density = 0.1
	if got := l.reread(ov, 2*time.Second, 0, 0.48, true); got != ov || l.split {
		t.Fatalf("quiet: reads %v split %v; want the overlap", got, l.split)
	}
	if !l.due(from, from.Add(time.Second)) {
		t.Fatal("not split: what is owed is not due at once")
	}
}

// TestBudgetKeepsTheLegacyPosition: an earlier version kept the second
// look's position in the budget's record; a restore keeps it as written,
// whatever the local clock says (the service's clock may be ahead: the read
// ledger checks it against the service's evidence when it migrates it),
// and the budget no longer writes it.
func TestBudgetKeepsTheLegacyPosition(t *testing.T) {
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	st := BudgetState{Limit: 166000, At: now, Level: 10, Checked: now.Add(9 * time.Minute)}
	r := NewBudget(0.25)
	r.Restore(st, now)
	if !r.checked.Equal(now.Add(9 * time.Minute)) {
		t.Fatalf("restored checked %v; want %v", r.checked, now.Add(9*time.Minute))
	}
	if got := r.Snapshot().Checked; !got.IsZero() {
		t.Fatalf("the budget wrote checked %v; the read ledger keeps it now", got)
	}
}
