package poller_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// skewCfg is the sweep of the skew tests: settle 2s, overlap 3s (the delays
// the issue was reported with), a sweep every second of the fake clock.
var skewCfg = poller.Config{Settle: 2 * time.Second, Overlap: 3 * time.Second}

// restart replaces the client and the poller (a new process) over the same
// state file; the simulator and the fake clock go on.
func (e *env) restart() {
	e.t.Helper()
	e.client = e.newClient(e.srv.URL)
	var err error
	if e.poll, err = poller.New(e.client, e.store, e.cfg); err != nil {
		e.t.Fatal(err)
	}
}

// sweepSkewed makes n changes a second for secs seconds of the fake clock,
// sweeping every second, and fails when the watermark is ever ahead of the
// service's true clock minus settle.
func sweepSkewed(t *testing.T, e *env, secs, n int, trueNow func() time.Time) {
	t.Helper()
	for range secs {
		e.sim.MutateRandom(n)
		e.clk.Advance(time.Second)
		if _, err := e.poll.Sweep(context.Background()); err != nil {
			t.Logf("sweep: %v", err)
		}
		meta, _ := e.store.Meta()
		if limit := trueNow().Add(-e.cfg.Settle); meta.Watermark.After(limit) {
			t.Fatalf("the watermark %v is ahead of the service's clock minus settle (%v)", meta.Watermark, limit)
		}
	}
}

// unpublished counts the orders last changed before before whose current
// state the snapshot (what the events have shown) does not hold yet.
func unpublished(e *env, before time.Time) int {
	e.t.Helper()
	snap := e.snapshot()
	n := 0
	for _, o := range e.sim.Orders() {
		s := snap[o.ID]
		if o.UpdatedAt.Before(before) && (s == nil || !s.UpdatedAt.Equal(o.UpdatedAt)) {
			n++
		}
	}
	return n
}

// skewEnv is an env with 300 orders, swept once and then for secs seconds
// of changes, five a second.
func skewEnv(t *testing.T, secs int) *env {
	t.Helper()
	e := newEnv(t, plentysim.Config{}, skewCfg)
	e.sim.Generate(300, t0.Add(-24*time.Hour), t0.Add(-time.Minute))
	e.sweep()
	sweepSkewed(t, e, secs, 5, e.clk.Now)
	return e
}

// TestDateSkewLongerThanAMinute: the service's Date header is 2 h ahead, or
// 2 h behind, for 90 s (the client follows a new Date after a minute): the
// watermark never passes the stamps, changes keep being published during
// the skew, and nothing is lost after it. With restart, a new process
// meets the skewed Date first (the process before saw the right one): the
// clock record keeps the watermark below the stamps.
func TestDateSkewLongerThanAMinute(t *testing.T) {
	for _, restart := range []bool{false, true} {
		for _, skew := range []time.Duration{2 * time.Hour, -2 * time.Hour} {
			t.Run(fmt.Sprintf("%v/restart=%v", skew, restart), func(t *testing.T) {
				e := skewEnv(t, 10)
				e.sim.SetFaults(plentysim.Faults{DateSkew: skew})
				if restart {
					e.clk.Advance(3 * time.Second) // the process is down
					e.restart()
				}
				sweepSkewed(t, e, 90, 5, e.clk.Now)
				if n := unpublished(e, e.clk.Now().Add(-10*time.Second)); n != 0 {
					t.Errorf("%d orders changed during the skew have no event for their status yet", n)
				}
				e.sim.SetFaults(plentysim.Faults{})
				sweepSkewed(t, e, 90, 5, e.clk.Now)
				assertNothingLost(t, e)
			})
		}
	}
}

// TestRestartLocalClockStepped: the new process's local wall clock is 2 h
// ahead or behind the one the clock record was saved with: the time carried
// over the restart is capped by what the Date says has passed, and a clock
// that went back carries nothing.
func TestRestartLocalClockStepped(t *testing.T) {
	for _, step := range []time.Duration{2 * time.Hour, -2 * time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			e := skewEnv(t, 10)
			// The new process's local wall clock is stepped; the service's
			// Date is right.
			var err error
			e.client, err = plenty.New(plenty.Config{
				BaseURL: e.srv.URL, Username: "demo", Password: "demo", Tokens: e.store,
				Now:   func() time.Time { return e.clk.Now().Add(step) },
				Pacer: plenty.NewPacer(plenty.PacerConfig{Reserve: 1, Now: e.clk.Now, Sleep: e.clk.Sleep}),
				Retry: plenty.RetryConfig{Initial: time.Millisecond, Max: 5 * time.Millisecond, MaxElapsed: 2 * time.Second},
			})
			if err != nil {
				t.Fatal(err)
			}
			cfg := e.cfg
			cfg.Now = func() time.Time { return e.clk.Now().Add(step) }
			if e.poll, err = poller.New(e.client, e.store, cfg); err != nil {
				t.Fatal(err)
			}
			sweepSkewed(t, e, 30, 5, e.clk.Now)
			assertNothingLost(t, e)
		})
	}
}

// clockEnv is an env whose simulator stamps changes (and dates its answers)
// with the fake clock moved by offset: the service's own clock.
func clockEnv(t *testing.T) (*env, *atomic.Int64) {
	t.Helper()
	e := newEnv(t, plentysim.Config{}, skewCfg)
	var offset atomic.Int64
	e.sim = plentysim.New(plentysim.Config{Seed: 7, Now: func() time.Time { return e.clk.Now().Add(time.Duration(offset.Load())) }})
	e.srv = httptest.NewServer(e.sim)
	t.Cleanup(e.srv.Close)
	e.restart()
	return e, &offset
}

// TestServiceClockSetBack: the service's clock (its stamps and its Date) is
// set back 2 h for good. The Date's move is followed after a minute; the
// changes stamped below the watermark confirm it: the watermark is rewound,
// and every change after the step is published.
func TestServiceClockSetBack(t *testing.T) {
	e, offset := clockEnv(t)
	// Orders last changed long before: a change after the step is newer
	// than what the snapshot holds.
	e.sim.Generate(300, t0.Add(-24*time.Hour), t0.Add(-3*time.Hour))
	e.sweep()
	orders := e.sim.Orders()
	simNow := func() time.Time { return e.clk.Now().Add(time.Duration(offset.Load())) }
	for _, o := range orders[:20] {
		e.clk.Advance(time.Second)
		if _, err := e.sim.SetStatus(o.ID, "5"); err != nil {
			t.Fatal(err)
		}
		e.sweep()
	}
	var rewound time.Time
	rewoundAt := 0
	var jumps []string
	e.cfg.OnClockJump = func(_ time.Duration, decision string) { jumps = append(jumps, decision) }
	if err := func() (err error) { e.poll, err = poller.New(e.client, e.store, e.cfg); return err }(); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(-2 * time.Hour))
	for i, o := range orders[20:200] {
		e.clk.Advance(time.Second)
		if _, err := e.sim.SetStatus(o.ID, "6"); err != nil {
			t.Fatal(err)
		}
		st, err := e.poll.Sweep(context.Background())
		if err != nil {
			t.Logf("sweep %d: %v", i, err)
		}
		if !st.Rewound.IsZero() && rewound.IsZero() {
			rewound, rewoundAt = e.clk.Now(), i+1
		}
		meta, _ := e.store.Meta()
		if limit := simNow().Add(-e.cfg.Settle); !rewound.IsZero() && meta.Watermark.After(limit) {
			t.Errorf("after %ds: the watermark %v is ahead of the service's clock minus settle %v", i, meta.Watermark, limit)
		}
	}
	if rewound.IsZero() || len(jumps) == 0 || jumps[0] != "rewound" {
		t.Fatalf("the clock set back was not detected: rewound %v, decisions %v", rewound, jumps)
	}
	t.Logf("the clock set back 2 h was confirmed and the watermark rewound by the sweep %d after the step", rewoundAt)
	assertServiceClock(t, e, simNow)
}

// TestServiceClockSetForward: the service's clock is set 2 h ahead for
// good: the stamps move with it and the watermark follows.
func TestServiceClockSetForward(t *testing.T) {
	e, offset := clockEnv(t)
	e.sim.Generate(300, t0.Add(-24*time.Hour), t0.Add(-time.Minute))
	e.sweep()
	sweepSkewed(t, e, 10, 5, e.clk.Now)
	offset.Store(int64(2 * time.Hour))
	simNow := func() time.Time { return e.clk.Now().Add(time.Duration(offset.Load())) }
	sweepSkewed(t, e, 120, 5, simNow)
	meta, _ := e.store.Meta()
	if lag := simNow().Sub(meta.Watermark); lag > time.Minute {
		t.Errorf("the watermark %v did not follow the service's clock set ahead (%v behind)", meta.Watermark, lag)
	}
	assertServiceClock(t, e, simNow)
}

// assertServiceClock is assertNothingLost against the service's own clock.
func assertServiceClock(t *testing.T, e *env, simNow func() time.Time) {
	t.Helper()
	meta, _ := e.store.Meta()
	if ahead := meta.Watermark.Sub(simNow()); ahead > 0 {
		t.Errorf("the watermark is %v ahead of the service's clock", ahead)
	}
	e.quiesce()
	e.assertSnapshotMatches()
	checkEvents(t, e.sim, e.events())
}

// TestClockRecordSaved: the clock record is written with the watermark, and
// the watermark is never past its bound minus settle; an unreadable record
// is "nothing known".
func TestClockRecordSaved(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, skewCfg)
	if err := e.store.SaveRecord("clock", "not a clock record"); err != nil {
		t.Fatal(err)
	}
	e.sim.Generate(50, t0.Add(-24*time.Hour), t0.Add(-time.Minute))
	e.sweep()
	sweepSkewed(t, e, 5, 3, e.clk.Now)
	var rec struct {
		Stamp, Bound, SavedAt time.Time
	}
	if found, err := e.store.LoadRecord("clock", &rec); err != nil || !found {
		t.Fatalf("clock record: found %v, %v", found, err)
	}
	meta, _ := e.store.Meta()
	var newest time.Time
	for _, o := range e.sim.Orders() {
		if o.UpdatedAt.After(newest) {
			newest = o.UpdatedAt
		}
	}
	// The bound is a stamp served, carried forward: never ahead of the
	// service's clock when it was saved (the fake clock's whole seconds).
	if rec.Stamp.After(newest) || rec.Bound.Before(rec.Stamp) || rec.Bound.After(rec.SavedAt) || rec.SavedAt.Sub(rec.Bound) > e.cfg.Settle+2*time.Second || meta.Watermark.After(rec.Bound.Add(-e.cfg.Settle)) {
		t.Errorf("record %+v (newest stamp %v), watermark %v", rec, newest, meta.Watermark)
	}
}

// TestServiceClockSetBackInABusyShop: in a busy shop (20 changes a second)
// the service's clock is set back 60 s. The five minutes below its Date
// hold thousands of changes the sweeps have seen, the lowest ids first:
// the changes the clock set back stamps there come last. They are looked
// for right below the Date first, found, and the watermark is rewound; the
// stamps of the old clock's last minute, read again, do not carry it past
// the new clock; every change has its events.
func TestServiceClockSetBackInABusyShop(t *testing.T) {
	t.Parallel()
	e, offset := clockEnv(t)
	e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-3*time.Hour))
	add := func(n int) {
		for range n {
			e.sim.AddOrder(plentysim.Order{})
		}
	}
	for range 360 { // six busy minutes, swept every second
		add(20)
		e.clk.Advance(time.Second)
		e.sweep()
	}
	offset.Store(int64(-time.Minute))
	rewoundAt := -1
	for i := range 60 {
		add(20)
		e.clk.Advance(time.Second)
		st, err := e.poll.Sweep(context.Background())
		if err != nil {
			t.Logf("sweep %d: %v", i, err)
		}
		if !st.Rewound.IsZero() {
			rewoundAt = i
			break
		}
	}
	if rewoundAt < 0 {
		t.Fatal("the clock set back 60 s in a busy shop was not detected in a minute: the watermark was not rewound")
	}
	t.Logf("rewound by the sweep %d after the step", rewoundAt+1)
	// The last minute the old clock stamped lies above the new clock: its
	// stamps are read again and must not carry the watermark past it.
	simNow := func() time.Time { return e.clk.Now().Add(time.Duration(offset.Load())) }
	for i := range 120 {
		add(20)
		e.clk.Advance(time.Second)
		if _, err := e.poll.Sweep(context.Background()); err != nil {
			t.Logf("sweep %d: %v", i, err)
		}
		meta, _ := e.store.Meta()
		if limit := simNow().Add(-e.cfg.Settle); meta.Watermark.After(limit) {
			t.Fatalf("%d s after the rewind the watermark %v is ahead of the service's clock minus settle %v", i+1, meta.Watermark, limit)
		}
	}
	e.quiesce()
	e.assertSnapshotMatches()
}
