package plenty

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestPeriodReserve(t *testing.T) {
	for _, tt := range []struct{ limit, want int }{
		{0, 1}, {1, 1}, {12, 1}, {30, 1}, {40, 1}, {41, 2}, {60, 2}, {200, 5}, {1000, 25},
	} {
		if got := PeriodReserve(tt.limit); got != tt.want {
			t.Errorf("PeriodReserve(%d) = %d, want %d", tt.limit, got, tt.want)
		}
	}
}

func TestSpacing(t *testing.T) {
	for _, tt := range []struct {
		decay  time.Duration
		usable int
		want   time.Duration
	}{
		{15 * time.Second, 10, 15 * time.Second / 11},
		{20 * time.Second, 194, 20 * time.Second / 195},
		{3 * time.Second, 1, 1500 * time.Millisecond}, // the last usable call falls before the reset
		{0, 5, 0},
		{10 * time.Second, 0, 0},
	} {
		if got := Spacing(tt.decay, tt.usable); got != tt.want {
			t.Errorf("Spacing(%v, %d) = %v, want %v", tt.decay, tt.usable, got, tt.want)
		}
	}
}

// fixedWindow is a short period as the service (and plentysim) counts it:
// a window of length starts at the first call after the previous one
// ended; -Decay is the time to its end in whole seconds, rounded up.
type fixedWindow struct {
	limit  int
	length time.Duration
	start  time.Time
	used   int
}

// call counts a call at now and returns the answer's status and headers.
func (w *fixedWindow) call(now time.Time) (int, Throttle) {
	if w.start.IsZero() || !now.Before(w.start.Add(w.length)) {
		w.start, w.used = now, 0
	}
	status := http.StatusOK
	if w.used < w.limit {
		w.used++
	} else {
		status = http.StatusTooManyRequests
	}
	left := w.start.Add(w.length).Sub(now)
	decay := left.Truncate(time.Second)
	if decay < left {
		decay += time.Second
	}
	th := Throttle{Short: Period{Present: true, Limit: w.limit, CallsLeft: w.limit - w.used, Decay: decay}, ServerTime: now.Truncate(time.Second), Observed: now}
	if status == http.StatusTooManyRequests {
		th.RetryAfter = decay
	}
	return status, th
}

// TestPacerUsesTheGrantedLimit: a caller that always has a call to make
// (changes wait) spends a short period's calls but the scaled reserve,
// spread over the period, and never one into a 429: at 12 calls per 15 s,
// 30 per 60 s and the service's 200 per 20 s, over ten simulated minutes.
func TestPacerUsesTheGrantedLimit(t *testing.T) {
	for _, tt := range []struct {
		limit  int
		length time.Duration
	}{
		{12, 15 * time.Second},
		{30, 60 * time.Second},
		{200, 20 * time.Second},
	} {
		clk := &fakeClock{now: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
		p := NewPacer(PacerConfig{Now: clk.Now, Sleep: clk.Sleep})
		w := &fixedWindow{limit: tt.limit, length: tt.length}
		start, end := clk.now, clk.now.Add(10*time.Minute)
		calls, refused := 0, 0
		var gap, lastAt time.Duration
		for clk.now.Before(end) {
			if err := p.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			status, th := w.call(clk.now)
			p.Observe(status, th)
			if status == http.StatusTooManyRequests {
				refused++
				continue
			}
			at := clk.now.Sub(start)
			if calls > 0 {
				gap = max(gap, at-lastAt)
			}
			calls, lastAt = calls+1, at
			clk.now = clk.now.Add(50 * time.Millisecond) // the answer's round trip
		}
		// Each period: its limit less the reserve, in the period plus the
		// second the pacer adds to the rounded -Decay and a round trip.
		usable := tt.limit - PeriodReserve(tt.limit)
		want := int(float64(usable) * (10 * time.Minute).Seconds() / (tt.length + 2*time.Second).Seconds())
		if refused > 0 || calls < want {
			t.Errorf("%d per %v: %d calls in 10 minutes, %d refused; want at least %d (%d a period) and none refused",
				tt.limit, tt.length, calls, refused, want, usable)
		}
		t.Logf("%d per %v: %d calls in 10 minutes, %d refused, longest gap %v", tt.limit, tt.length, calls, refused, gap)
		// Spread, not a burst and a silent rest of the period.
		if most := 2*tt.length/time.Duration(usable) + 2*time.Second; gap > most {
			t.Errorf("%d per %v: longest gap between two calls %v, want at most %v", tt.limit, tt.length, gap, most)
		}
	}
}

func TestPacerNext(t *testing.T) {
	p, clk := newTestPacer()
	if !p.Next().IsZero() {
		t.Errorf("a new pacer's next call: %v, want now", p.Next())
	}
	_ = p.Wait(context.Background())
	p.Observe(http.StatusOK, short(15, 10*time.Second)) // 10 usable calls in 10 s
	if want := clk.now.Add(10 * time.Second / 11); !p.Next().Equal(want) {
		t.Errorf("next call at %v, want %v (the spacing after the last call)", p.Next(), want)
	}
	p.Observe(http.StatusOK, short(5, 8*time.Second)) // down to the reserve
	if want := clk.now.Add(9 * time.Second); !p.Next().Equal(want) {
		t.Errorf("next call at %v, want %v (the reset, a second late)", p.Next(), want)
	}
}
