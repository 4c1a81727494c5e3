package plenty

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// spentDay is the 429 of a spent daily quota: Retry-After and the long
// period's -Calls-Reset name the reset, d after the service's Date.
func spentDay(server time.Time, d time.Duration) Throttle {
	return Throttle{
		Long:       Period{Present: true, Limit: 166000, CallsLeft: 0, Decay: d, Reset: server.Add(d)},
		Short:      Period{Present: true, Limit: 200, CallsLeft: 150, Decay: 10 * time.Second},
		RetryAfter: d, ServerTime: server,
	}
}

// TestPacerWaitPersisted: a wait that starts is told to OnWait with what a
// restart needs (reason, the announced wait, the reset on the service's
// clock), and cleared once it has passed; a restored pacer makes no call
// before the wait ends.
func TestPacerWaitPersisted(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	var told []Wait
	p := NewPacer(PacerConfig{Now: clk.Now, Sleep: clk.Sleep, OnWait: func(w Wait) { told = append(told, w) }})
	server := clk.now.Add(-2 * time.Hour) // the service's clock is two hours behind ours
	p.Observe(http.StatusTooManyRequests, spentDay(server, 40*time.Second))
	if len(told) != 1 {
		t.Fatalf("OnWait told %d times after the 429; want once", len(told))
	}
	// The long period's -Decay is whole seconds: the pacer waits one more.
	end := clk.now.Add(41 * time.Second)
	w := told[0]
	if w.Reason != WaitDailyQuota || !w.Until.Equal(end) || w.Announced != 41*time.Second ||
		!w.Reset.Equal(server.Add(40*time.Second)) || !w.ServerAt.Equal(server) || !w.Measured.Equal(clk.now) {
		t.Errorf("told %+v", w)
	}
	// Through the record (JSON) into a new process 4 s later.
	raw, err := json.Marshal([]Wait{w})
	if err != nil {
		t.Fatal(err)
	}
	var saved []Wait
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatal(err)
	}
	clk2 := &fakeClock{now: clk.now.Add(4 * time.Second)}
	p2 := NewPacer(PacerConfig{Now: clk2.Now, Sleep: clk2.Sleep, OnWait: func(w Wait) { told = append(told, w) }})
	got, ok := p2.Restore(saved...)
	if !ok || got.Reason != WaitDailyQuota || !got.Until.Equal(end) {
		t.Fatalf("restored %+v, %v; want the daily-quota wait until %v", got, ok, end)
	}
	if err := p2.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sum(clk2.slept) != 37*time.Second {
		t.Errorf("the restored pacer waited %v; want the 37 s left of the wait", sum(clk2.slept))
	}
	if len(told) != 2 || !told[1].Until.IsZero() {
		t.Errorf("after the wait passed OnWait heard %+v; want the wait cleared", told[1:])
	}
}

// TestWaitRemainingGuards: a restored wait is what is left of it on the
// local clock, capped by what the service announced (a clock set back
// since) and at a minute past the service's own reset (Retry-After beyond
// it); never negative.
func TestWaitRemainingGuards(t *testing.T) {
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	server := at.Add(-3 * time.Hour)
	w := Wait{Until: at.Add(40 * time.Second), Reason: WaitDailyQuota, Measured: at, Announced: 40 * time.Second,
		Reset: server.Add(40 * time.Second), ServerAt: server}
	for _, tt := range []struct {
		name string
		w    Wait
		now  time.Time
		want time.Duration
	}{
		{"4 s later: 36 s left", w, at.Add(4 * time.Second), 36 * time.Second},
		{"after the wait: nothing left", w, at.Add(41 * time.Second), 0},
		{"the local clock was set back 2 h: no more than announced", w, at.Add(-2 * time.Hour), 40 * time.Second},
		{"a Retry-After of 5 h for a reset in 40 s: a minute past the reset", func() Wait {
			w := w
			w.Until, w.Announced = at.Add(5*time.Hour), 5*time.Hour
			return w
		}(), at.Add(10 * time.Second), 90 * time.Second},
		{"no reset named: the announced wait", func() Wait {
			w := w
			w.Reset, w.ServerAt = time.Time{}, time.Time{}
			return w
		}(), at.Add(-time.Hour), 40 * time.Second},
		{"an unreadable record (zero): no wait", Wait{}, at, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.Remaining(tt.now); got != tt.want {
				t.Errorf("Remaining = %v; want %v", got, tt.want)
			}
		})
	}
}

// TestPacerWaitReasons: the long period's reserve and its 429 are a daily
// quota wait; a short period's 429 is throttling, its reserve a reserve
// wait; a daily quota wait that a short one began is named daily.
func TestPacerWaitReasons(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name   string
		obs    []Throttle
		status []int
		want   WaitReason
	}{
		{"long period down to its reserve", []Throttle{{Long: Period{Present: true, Limit: 166000, CallsLeft: 80, Decay: time.Hour}, ServerTime: now}}, []int{200}, WaitDailyQuota},
		{"429 of the long period", []Throttle{spentDay(now, time.Hour)}, []int{429}, WaitDailyQuota},
		{"429 of the short period", []Throttle{func() Throttle { th := short(0, 8*time.Second); th.RetryAfter = 8 * time.Second; return th }()}, []int{429}, WaitThrottled},
		{"short period down to its reserve", []Throttle{short(3, 8*time.Second)}, []int{200}, WaitReserve},
		{"a short wait, then the daily quota within the minute", []Throttle{short(3, 8*time.Second), spentDay(now, 30*time.Second)}, []int{200, 429}, WaitDailyQuota},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPacer(PacerConfig{LongReserve: 100, Now: func() time.Time { return now }})
			for i, th := range tt.obs {
				p.Observe(tt.status[i], th)
			}
			w, ok := p.Pending()
			if !ok || w.Reason != tt.want {
				t.Errorf("pending %+v, %v; want reason %s", w, ok, tt.want)
			}
		})
	}
}
