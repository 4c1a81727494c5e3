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

// TestSecondLookBookkeeping: a process's first sweep reads the overlap and
// where a predecessor's second look may have trailed; verified sweeps move
// what is checked only where they read it at the overlap's age; the second
// look is due once it holds most of a page or secondLookMax, or at once when
// the sweeps stopped splitting.
func TestSecondLookBookkeeping(t *testing.T) {
	const ov = 10 * time.Second
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	l := &secondLook{}
	if got := l.reread(ov, 2*time.Second, 0, 0.48, true); got != ov+2*secondLookMax {
		t.Fatalf("first sweep reads %v; want %v", got, ov+2*secondLookMax)
	}
	if got := l.reread(ov, 2*time.Second, 0, 0.48, false); got != ov {
		t.Fatalf("first sweep under an explicit overlap reads %v; want the overlap", got)
	}
	// The first sweep: window [wm-70s, t0], verified: checked = t0 - overlap;
	// a catch-up's window (over a minute) measures no density.
	l.swept(Stats{Lo: t0.Add(-70 * time.Second), Hi: t0, Watermark: t0, Entries: 1400}, nil, ov, 250)
	if !l.checked.Equal(t0.Add(-ov)) || l.density != 0 || l.page != 250 {
		t.Fatalf("after the first sweep: checked %v density %g page %d", l.checked, l.density, l.page)
	}
	l.swept(Stats{Lo: t0.Add(-ov - 3*time.Second), Hi: t0.Add(2 * time.Second), Watermark: t0, Entries: 300}, nil, ov, 250)
	if !l.checked.Equal(t0.Add(-ov)) || l.density != 20 {
		t.Fatalf("after the first sweep: checked %v density %g page %d", l.checked, l.density, l.page)
	}
	if got := l.reread(ov, 2*time.Second, 0, 0.48, true); got != freshOverlap || !l.split {
		t.Fatalf("busy: the next sweep reads %v (split %v); want %v", got, l.split, freshOverlap)
	}
	// A split sweep reads [wm-5s, wm+2.5s]: nothing at the overlap's age.
	wm := t0.Add(2500 * time.Millisecond)
	l.swept(Stats{Lo: t0.Add(-freshOverlap), Hi: wm, Watermark: wm, Entries: 150}, nil, ov, 250)
	if !l.checked.Equal(t0.Add(-ov)) {
		t.Fatalf("a split sweep moved checked to %v", l.checked)
	}
	if _, _, ok := l.due(wm, ov, 2500*time.Millisecond); ok {
		t.Fatal("second look due after 2.5 s (50 orders)")
	}
	// 11.5 s later: 12 s left the overlap (240 orders, most of a page).
	wm = wm.Add(9500 * time.Millisecond)
	from, to, ok := l.due(wm, ov, 2500*time.Millisecond)
	if !ok || !from.Equal(t0.Add(-ov)) || !to.Equal(wm.Add(-ov)) {
		t.Fatalf("due %v [%v, %v]; want [%v, %v]", ok, from, to, t0.Add(-ov), wm.Add(-ov))
	}
	// A failed sweep moves nothing.
	l.swept(Stats{Lo: wm.Add(-freshOverlap), Hi: wm.Add(time.Minute), Watermark: wm.Add(time.Minute)}, errTest, ov, 250)
	if !l.checked.Equal(t0.Add(-ov)) {
		t.Fatalf("a failed sweep moved checked to %v", l.checked)
	}
	// Quiet again: sweeps read the whole overlap and the rest is due at once.
	l.density = 0.1
	if got := l.reread(ov, 2*time.Second, 0, 0.48, true); got != ov || l.split {
		t.Fatalf("quiet: reads %v split %v; want the overlap", got, l.split)
	}
	if _, _, ok := l.due(t0.Add(2*time.Second), ov, 2500*time.Millisecond); !ok {
		t.Fatal("not split: what is left of the second look is not due at once")
	}
	// An unsplit sweep from below checked moves it to its watermark - overlap.
	l.swept(Stats{Lo: t0.Add(-20 * time.Second), Hi: t0.Add(30 * time.Second), Watermark: t0.Add(30 * time.Second)}, nil, ov, 250)
	if !l.checked.Equal(t0.Add(20 * time.Second)) {
		t.Fatalf("checked %v after an unsplit sweep; want %v", l.checked, t0.Add(20*time.Second))
	}
}

// TestSecondLookAfterAClockRewind: a sweep that rewound the watermark (a
// clock set back: the service stamps the seconds above the new watermark
// anew) lowers checked to its watermark minus the overlap, so that the
// second look reads those seconds at the overlap's age.
func TestSecondLookAfterAClockRewind(t *testing.T) {
	const ov = 10 * time.Second
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	l := &secondLook{checked: t0.Add(-ov), density: 20, page: 250, split: true}
	back := t0.Add(-time.Minute)
	l.swept(Stats{Lo: back.Add(-ov), Hi: back.Add(2 * time.Second), Watermark: back.Add(2 * time.Second), Rewound: t0, Entries: 240}, nil, ov, 250)
	if want := back.Add(2*time.Second - ov); !l.checked.Equal(want) {
		t.Fatalf("checked %v after a rewind to %v; want %v", l.checked, back, want)
	}
	from, _, ok := l.due(back.Add(40*time.Second), ov, 2*time.Second)
	if !ok || from.After(back.Add(2*time.Second-ov)) {
		t.Fatalf("second look after the rewind: due %v from %v", ok, from)
	}
}

// TestBudgetCarriesTheSecondLook: the budget's record carries how far the
// second look got; a restore keeps it, and drops one in the future (a
// damaged record: the first sweep then reads where it may have trailed).
func TestBudgetCarriesTheSecondLook(t *testing.T) {
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	b := NewBudget(0.25)
	b.checked = now.Add(-time.Minute)
	st := b.Snapshot()
	st.Limit, st.At = 166000, now
	r := NewBudget(0.25)
	r.Restore(st, now)
	if !r.checked.Equal(now.Add(-time.Minute)) {
		t.Fatalf("restored checked %v; want %v", r.checked, now.Add(-time.Minute))
	}
	st.Checked = now.Add(time.Hour)
	r = NewBudget(0.25)
	r.Restore(st, now)
	if !r.checked.IsZero() {
		t.Fatalf("a checked in the future restored as %v; want none", r.checked)
	}
}
