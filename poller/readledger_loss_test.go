package poller_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// The four ways a change within the promise was lost, each inside the
// bounds the docs state (every change visible up to the overlap late is
// found by the sweeps and the second look, every one up to 5 minutes late
// by the probes): what has been read is one ledger now (ledger.go).

// TestLateBulkSecondIsReadWhole: 4,600 orders stamped in one second
// become visible 8 s later (a long transaction) in a busy shop at the
// defaults, past the split sweeps' 5 s: the second look reads that second
// by keyset, KeysetPages pages at a time, and counts it read only once it
// got to its end. Every one of the 4,600 has its event.
func TestLateBulkSecondIsReadWhole(t *testing.T) {
	t.Parallel()
	const bulk = 4600
	var ids []int64
	busyRun{
		sweeps: 150,
		seed:   21,
		rate:   func(int) int { return 20 },
		inject: func(n int, st poller.Stats, sim *plentysim.Server) []int64 {
			if n != 80 {
				return nil
			}
			at := st.Watermark.Add(-8 * time.Second)
			for range bulk {
				ids = append(ids, sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at}).ID)
			}
			return ids
		},
	}.run(t)
	if len(ids) != bulk {
		t.Fatalf("%d orders injected; want %d", len(ids), bulk)
	}
}

// TestRestoredReadsFollowTheServiceClock: the service's clock is 10
// minutes ahead of the local one; second looks fail for minutes (they
// trail the sweeps), and the process restarts twice meanwhile. What was
// read is stated in the service's time and checked against the service's
// own evidence, not the local clock: the restarted process goes on from
// where the second look got, and every late commit has its event.
func TestRestoredReadsFollowTheServiceClock(t *testing.T) {
	t.Parallel()
	restartsWhileLooksFail(t, 10*time.Minute)
}

// quietRun drives a quiet shop on the fake clock through Run at the
// defaults, a change every 10 s, the searches whose window ends more than
// 8 s below the service's clock failing while fail is set (a probe's or a
// second look's: a sweep's ends settle below it). onSweep returns true to
// stop.
func quietRun(t *testing.T, e *env, fail *atomic.Bool, onSweep func(n int, st poller.Stats) bool) {
	t.Helper()
	quietRunEvery(t, e, fail, 0, onSweep)
}

// quietRunEvery is quietRun with sweeps every interval (0: the derived
// pace, 2.08 s): a test of the probes' backoff over most of an hour of
// the service's time needs no sweep more often than every 10 s.
func quietRunEvery(t *testing.T, e *env, fail *atomic.Bool, interval time.Duration, onSweep func(n int, st poller.Stats) bool) {
	t.Helper()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() && searchBelow(r, e.clk.Now().Add(-8*time.Second)) {
			serverError(w)
			return
		}
		e.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	e.srv = proxy
	e.restartFailFast(e.cfg)
	tm := poller.NewTimings(poller.TimingsConfig{Records: e.store})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	next := e.clk.Now()
	err := e.poll.Run(ctx, poller.RunConfig{
		CallShare: 0.25, Throttle: e.client.Throttle, Timings: tm, Calls: e.client.Calls, Interval: interval,
		OnSweep: func(st poller.Stats, _ error) {
			n++
			// A change every 10 s: the stamps keep the watermark close
			// to the service's clock.
			if now := e.clk.Now(); !now.Before(next) {
				e.sim.AddOrder(plentysim.Order{CreatedAt: now, UpdatedAt: now})
				next = now.Add(10 * time.Second)
			}
			if onSweep(n, st) || n > 5000 {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestProbesLeaveNoHole: probes back off (40 minutes between them, their
// windows as long) and a probe of a dense past takes minutes. The next
// probe reads on from where the last one ended, not back from its own
// start: a change stamped just above the last probe's window, visible 2
// minutes after its stamp (within the 5 minutes the probes promise), has
// its event.
func TestProbesLeaveNoHole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}}, poller.Config{})
	for at := t0.Add(-30 * time.Minute); at.Before(t0); at = at.Add(50 * time.Millisecond) {
		e.sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at})
	}
	if err := e.store.SaveRecord(poller.TimingsRecord, map[string]any{
		"version": 1, "settleMs": 1000, "overlapMs": 10000, "changed": t0.Add(-time.Hour),
		"probe": t0.Add(-21 * time.Minute), "probeEveryMs": (20 * time.Minute).Milliseconds(),
	}); err != nil {
		t.Fatal(err)
	}
	var (
		fail    atomic.Bool
		probes  int
		last    time.Time
		late    int64
		after   int // sweeps after the probe that must find it
		lastEnd time.Time
	)
	at := t0.Add(5 * time.Second)
	// Sweeps every 10 s: the first probe's dense past takes longer (about
	// 7 minutes instead of 4), and the stretch between the windows of the
	// first and second probe that the hole was holds the change all the
	// same.
	quietRunEvery(t, e, &fail, 10*time.Second, func(n int, st poller.Stats) bool {
		if n == 1 {
			last = st.Timings.LastProbe // the record's
		}
		if lp := st.Timings.LastProbe; !lp.Equal(last) {
			probes++
			last = lp
			t.Logf("probe %d ended at %v (watermark %v)", probes, lp.Sub(t0), st.Watermark.Sub(t0))
			lastEnd = lp
		}
		if late == 0 && e.clk.Now().After(at.Add(2*time.Minute)) {
			late = e.sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at}).ID
		}
		if probes >= 2 {
			after++
		}
		return after > 5
	})
	if probes < 2 || lastEnd.Sub(t0) < 30*time.Minute {
		t.Fatalf("%d probes, the last ended at %v: the test did not back off", probes, lastEnd.Sub(t0))
	}
	if len(e.eventsOf(late)) == 0 {
		t.Errorf("the change stamped at %v, visible 2 minutes later, has no event after %d probes", at.Sub(t0), probes)
	}
}

// TestFailedProbeLeavesItsWindowOwed: a probe whose calls fail (a 5xx
// that outlasts the retries) has read nothing: the next one reads its
// window. A change visible 2 minutes after its stamp, in the failed
// probe's window only, has its event.
func TestFailedProbeLeavesItsWindowOwed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}}, poller.Config{})
	e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
	var (
		fail   atomic.Bool
		probes int
		last   time.Time
		wmA    time.Time // the watermark when the first probe ended
		late   int64
		at     time.Time
		after  int
	)
	quietRun(t, e, &fail, func(n int, st poller.Stats) bool {
		if lp := st.Timings.LastProbe; !lp.Equal(last) {
			probes++
			last = lp
			t.Logf("probe %d ended at %v (watermark %v)", probes, lp.Sub(t0), st.Watermark.Sub(t0))
			switch probes {
			case 2: // the first probe ran before the stamps led the watermark
				wmA = st.Watermark
			case 3:
				fail.Store(false) // the failed probe has ended
			}
		}
		if probes == 2 && late == 0 && st.Watermark.After(wmA.Add(4*time.Minute)) {
			// Stamped 2 minutes after the second probe's end, visible now:
			// the sweeps have passed it; the third probe's window holds it.
			at = wmA.Add(2 * time.Minute)
			late = e.sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at}).ID
			fail.Store(true)
		}
		if probes >= 4 {
			after++
		}
		return after > 5
	})
	if probes < 4 || late == 0 {
		t.Fatalf("%d probes, late change %d: the test did not run its course", probes, late)
	}
	if len(e.eventsOf(late)) == 0 {
		t.Errorf("the change stamped at %v, visible 2 minutes later, in the failed probe's window, has no event after %d probes", at.Sub(t0), probes)
	}
}
