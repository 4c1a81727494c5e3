package plenty

import (
	"testing"
	"time"
)

// TestServerClock: the estimate runs on the monotonic clock; a Date that
// jumps is distrusted, one that keeps its new time for a minute is
// accepted; the estimate never goes back while Dates agree.
func TestServerClock(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	var c serverClock
	if _, ok := c.now(0); ok {
		t.Fatal("an estimate before the first Date")
	}
	c.observe(t0, 0)
	at := func(mono time.Duration) time.Time { n, _ := c.now(mono); return n }
	if got := at(10 * time.Second); !got.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("10s later: %v", got)
	}
	// A Date truncated to the second, a little behind the estimate: kept.
	if ev := c.observe(t0.Add(10*time.Second), 10500*time.Millisecond); ev.kind != clockOK {
		t.Errorf("a Date within the tolerance: %v", ev.kind)
	}
	if got := at(10500 * time.Millisecond); got.Before(t0.Add(10500 * time.Millisecond)) {
		t.Errorf("the estimate went back to %v", got)
	}
	// 2 h ahead for a few seconds: distrusted.
	if ev := c.observe(t0.Add(2*time.Hour+11*time.Second), 11*time.Second); ev.kind != clockJump || ev.jump < 2*time.Hour-time.Second {
		t.Errorf("a Date 2 h ahead: %+v", ev)
	}
	c.observe(t0.Add(2*time.Hour+13*time.Second), 13*time.Second)
	if got := at(14 * time.Second); !got.Equal(t0.Add(14 * time.Second)) {
		t.Errorf("while distrusted: %v", got)
	}
	// What the distrusted Dates say, carried forward: a hint.
	if got, ok := c.latest(14 * time.Second); !ok || !got.Equal(t0.Add(2*time.Hour+14*time.Second)) {
		t.Errorf("latest while distrusted: %v", got)
	}
	if ev := c.observe(t0.Add(15*time.Second), 15*time.Second); ev.kind != clockRecovered {
		t.Errorf("back to normal: %v", ev.kind)
	}
	if got, _ := c.latest(16 * time.Second); !got.Equal(t0.Add(16 * time.Second)) {
		t.Errorf("latest when trusted: %v", got)
	}
	// The service's clock is really set back an hour: accepted after a minute.
	var accepted time.Duration
	for s := 20 * time.Second; s < 3*time.Minute; s += 5 * time.Second {
		if ev := c.observe(t0.Add(s-time.Hour), s); ev.kind == clockAccepted {
			accepted = s
			break
		}
	}
	if accepted < 80*time.Second || accepted > 90*time.Second {
		t.Errorf("the new clock was accepted at %v; want a minute after the first such Date (20s)", accepted)
	}
	if got := at(accepted); !got.Equal(t0.Add(accepted - time.Hour)) {
		t.Errorf("after acceptance: %v", got)
	}
}
