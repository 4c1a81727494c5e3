package plenty

import (
	"bufio"
	"context"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// responses reads the header blocks of testdata/throttle-headers.txt.
func responses(t *testing.T) []http.Header {
	t.Helper()
	var out []http.Header
	for _, block := range strings.Split(string(fixture(t, "throttle-headers.txt")), "HTTP/1.1 ")[1:] {
		r := textproto.NewReader(bufio.NewReader(strings.NewReader(block)))
		if _, err := r.ReadLine(); err != nil { // status line
			t.Fatal(err)
		}
		h, err := r.ReadMIMEHeader()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, http.Header(h))
	}
	if len(out) != 2 {
		t.Fatalf("want 2 responses in the fixture, got %d", len(out))
	}
	return out
}

func TestParseThrottleFixture(t *testing.T) {
	rs := responses(t)
	now := time.Date(2026, 11, 22, 9, 2, 50, 0, time.UTC)
	th := ParseThrottle(rs[0], now)
	want := Throttle{
		Long:       Period{Present: true, Limit: 166000, CallsLeft: 151433, Decay: 29770 * time.Second},
		Short:      Period{Present: true, Limit: 200, CallsLeft: 187, Decay: 14 * time.Second},
		Route:      Period{Present: true, Limit: 60, CallsLeft: 58, Decay: 41 * time.Second},
		ServerTime: time.Date(2026, 11, 22, 9, 2, 50, 0, time.UTC),
		Observed:   now,
	}
	if !th.ServerTime.Equal(want.ServerTime) || th.Long != want.Long || th.Short != want.Short || th.Route != want.Route || th.RetryAfter != 0 {
		t.Errorf("ParseThrottle =\n%+v\nwant\n%+v", th, want)
	}
	th = ParseThrottle(rs[1], now)
	if th.RetryAfter != 8*time.Second || th.Short.CallsLeft != 0 || !th.Short.Reset.Equal(time.Unix(1795338184, 0)) || th.Long.Present {
		t.Errorf("429 headers = %+v", th)
	}
}

func TestParseThrottleTolerant(t *testing.T) {
	h := http.Header{}
	h.Set("X-Plenty-Global-Short-Period-Limit", "abc")
	h.Set("X-Plenty-Global-Short-Period-Calls-Left", "-3")
	h.Set("X-Plenty-Global-Short-Period-Decay", "99999999999")
	h.Set("Retry-After", "soon")
	h.Set("Date", "yesterday")
	th := ParseThrottle(h, time.Now())
	if !th.Short.Present || th.Short.Limit != 0 || th.Short.CallsLeft != -1 || th.Short.Decay != 0 || th.RetryAfter != 0 || !th.ServerTime.IsZero() {
		t.Errorf("malformed values must be ignored: %+v", th)
	}
	h = http.Header{}
	h.Set("Date", "Sun, 22 Nov 2026 09:02:56 GMT")
	h.Set("Retry-After", "Sun, 22 Nov 2026 09:03:06 GMT")
	if th := ParseThrottle(h, time.Now()); th.RetryAfter != 10*time.Second {
		t.Errorf("Retry-After as a date = %v, want 10s", th.RetryAfter)
	}
}

// fakeClock is a clock for pacer tests: Sleep advances it.
type fakeClock struct {
	now    time.Time
	slept  []time.Duration
	cancel bool
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

func newTestPacer() (*Pacer, *fakeClock) {
	clk := &fakeClock{now: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	return NewPacer(PacerConfig{Reserve: 5, LongReserve: 100, Now: clk.Now, Sleep: clk.Sleep}), clk
}

func short(left int, decay time.Duration) Throttle {
	return Throttle{Short: Period{Present: true, Limit: 200, CallsLeft: left, Decay: decay}}
}

func TestPacerNoWaitWhenFree(t *testing.T) {
	p, clk := newTestPacer()
	for range 3 {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(clk.slept) != 0 {
		t.Errorf("slept %v without any headers", clk.slept)
	}
}

func TestPacerRetryAfter(t *testing.T) {
	p, clk := newTestPacer()
	th := short(0, 8*time.Second)
	th.RetryAfter = 8 * time.Second
	p.Observe(http.StatusTooManyRequests, th)
	if err := p.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if total := sum(clk.slept); total < 8*time.Second {
		t.Errorf("waited %v after Retry-After: 8", total)
	}
}

func TestPacerResetHeaderWithoutRetryAfter(t *testing.T) {
	p, clk := newTestPacer()
	th := short(0, 0)
	th.ServerTime = clk.now.Add(-time.Hour) // server clock an hour behind ours
	th.Short.Reset = th.ServerTime.Add(12 * time.Second)
	p.Observe(http.StatusTooManyRequests, th)
	_ = p.Wait(context.Background())
	if total := sum(clk.slept); total < 12*time.Second || total > 14*time.Second {
		t.Errorf("waited %v; the reset is 12s after the server's Date", total)
	}
}

func TestPacer429WithoutHints(t *testing.T) {
	p, clk := newTestPacer()
	p.Observe(http.StatusTooManyRequests, Throttle{})
	_ = p.Wait(context.Background())
	if total := sum(clk.slept); total != 20*time.Second {
		t.Errorf("waited %v, want the default block of 20s", total)
	}
}

func TestPacerKeepsReserve(t *testing.T) {
	p, clk := newTestPacer()
	p.Observe(http.StatusOK, short(5, 14*time.Second))
	_ = p.Wait(context.Background())
	if total := sum(clk.slept); total < 14*time.Second {
		t.Errorf("with calls left at the reserve the pacer must wait out the period; waited %v", total)
	}
}

func TestPacerSpreadsCalls(t *testing.T) {
	p, clk := newTestPacer()
	_ = p.Wait(context.Background())
	p.Observe(http.StatusOK, short(15, 10*time.Second)) // 10 spendable calls in 10s
	_ = p.Wait(context.Background())
	if want := 10 * time.Second / 11; sum(clk.slept) != want {
		t.Errorf("waited %v, want %v (10 calls spread so that the last falls before the reset)", sum(clk.slept), want)
	}
}

func TestPacerLongReserve(t *testing.T) {
	p, clk := newTestPacer()
	p.Observe(http.StatusOK, Throttle{Long: Period{Present: true, Limit: 166000, CallsLeft: 100, Decay: time.Hour}})
	_ = p.Wait(context.Background())
	if total := sum(clk.slept); total < time.Hour {
		t.Errorf("waited %v: the daily reserve must not be spent", total)
	}
}

func TestPacerContext(t *testing.T) {
	p, _ := newTestPacer()
	p.Observe(http.StatusTooManyRequests, Throttle{RetryAfter: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Wait(ctx); err == nil {
		t.Error("Wait must return the context's error")
	}
}

func sum(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s
}

// TestPacerHonoursLongWaits: a spent daily quota is waited out whole, be it
// named by Retry-After or only by the period's -Calls-Reset, and OnBlock
// hears the end time once.
func TestPacerHonoursLongWaits(t *testing.T) {
	for _, tt := range []struct {
		name string
		th   func(now time.Time) Throttle
		want time.Duration
	}{
		{"Retry-After of 10 hours", func(time.Time) Throttle {
			return Throttle{RetryAfter: 36000 * time.Second, Long: Period{Present: true, Limit: 166000, CallsLeft: 0}}
		}, 36000 * time.Second},
		{"-Calls-Reset 6 hours away, no decay", func(now time.Time) Throttle {
			return Throttle{ServerTime: now, Long: Period{Present: true, Limit: 166000, CallsLeft: 0, Reset: now.Add(6 * time.Hour)}}
		}, 6*time.Hour + time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{now: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
			var told []time.Time
			p := NewPacer(PacerConfig{Now: clk.Now, Sleep: clk.Sleep, OnBlock: func(until time.Time, _ string) { told = append(told, until) }})
			start := clk.Now()
			p.Observe(http.StatusTooManyRequests, tt.th(start))
			if err := p.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := clk.Now().Sub(start); got < tt.want {
				t.Errorf("the first call after the 429 came %v later; the service named %v", got, tt.want)
			}
			if len(told) != 1 || !told[0].Equal(start.Add(tt.want)) {
				t.Errorf("OnBlock heard %v; want once, the end %v", told, start.Add(tt.want))
			}
		})
	}
}
