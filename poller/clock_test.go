package poller_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/state"
)

// dateSkew serves the simulator with its Date header moved by skew (a
// service whose Date is wrong for a while).
type dateSkew struct {
	sim  http.Handler
	skew atomic.Int64
}

type skewWriter struct {
	http.ResponseWriter
	skew time.Duration
	done bool
}

func (w *skewWriter) WriteHeader(code int) {
	if !w.done && w.skew != 0 {
		if d, err := http.ParseTime(w.Header().Get("Date")); err == nil {
			w.Header().Set("Date", d.Add(w.skew).UTC().Format(http.TimeFormat))
		}
	}
	w.done = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *skewWriter) Write(b []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (d *dateSkew) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.sim.ServeHTTP(&skewWriter{ResponseWriter: w, skew: time.Duration(d.skew.Load())}, r)
}

// changeAndSweep makes n status changes a second for secs seconds of the
// fake clock, sweeping every second.
func changeAndSweep(t *testing.T, e *env, secs, n int) {
	t.Helper()
	for range secs {
		e.sim.MutateRandom(n)
		e.clk.Advance(time.Second)
		if _, err := e.poll.Sweep(context.Background()); err != nil {
			t.Logf("sweep: %v", err)
		}
	}
}

// TestDateAheadForAFewSeconds: the service's Date header says 2 h ahead for
// a few seconds. The estimate stays on the monotonic clock, and every
// change, during and after, is published.
func TestDateAheadForAFewSeconds(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{Settle: 2 * time.Second, Overlap: 3 * time.Second})
	skew := &dateSkew{sim: e.sim}
	srv := httptest.NewServer(skew)
	t.Cleanup(srv.Close)
	e.client = e.newClient(srv.URL)
	var err error
	e.poll, err = poller.New(e.client, e.store, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.sim.Generate(300, t0.Add(-24*time.Hour), t0.Add(-time.Minute))
	e.sweep()
	changeAndSweep(t, e, 5, 3)
	skew.skew.Store(int64(2 * time.Hour))
	changeAndSweep(t, e, 4, 3) // a few seconds of a Date 2 h ahead
	if trouble := e.client.ClockTrouble(); !strings.Contains(trouble, "2h0m") {
		t.Errorf("ClockTrouble = %q; want the 2 h jump named", trouble)
	}
	skew.skew.Store(0)
	changeAndSweep(t, e, 10, 3)
	assertNothingLost(t, e)
}

// assertNothingLost checks that the watermark is not ahead of the service's
// clock, and that after quiescence every change has been published.
func assertNothingLost(t *testing.T, e *env) {
	t.Helper()
	meta, _ := e.store.Meta()
	if ahead := meta.Watermark.Sub(e.clk.Now()); ahead > 0 {
		t.Errorf("the watermark is %v ahead of the service's clock", ahead)
	}
	e.quiesce()
	e.assertSnapshotMatches()
	checkEvents(t, e.sim, e.events())
}

// TestLocalClockSteppedForward: the local clock jumps 2 h ahead (NTP, a VM
// resumed) while the monotonic clock does not: every later change is still
// published.
func TestLocalClockSteppedForward(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{Settle: 2 * time.Second, Overlap: 3 * time.Second})
	var step atomic.Int64
	client, err := plenty.New(plenty.Config{
		BaseURL: e.srv.URL, Username: "demo", Password: "demo", Tokens: e.store,
		Now:       func() time.Time { return e.clk.Now().Add(time.Duration(step.Load())) },
		Monotonic: func() time.Duration { return e.clk.Now().Sub(t0) },
		Pacer:     plenty.NewPacer(plenty.PacerConfig{Reserve: 1, Now: e.clk.Now, Sleep: e.clk.Sleep}),
		Retry:     plenty.RetryConfig{Initial: time.Millisecond, Max: 5 * time.Millisecond, MaxElapsed: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.client = client
	if e.poll, err = poller.New(e.client, e.store, e.cfg); err != nil {
		t.Fatal(err)
	}
	e.sim.Generate(300, t0.Add(-24*time.Hour), t0.Add(-time.Minute))
	e.sweep()
	changeAndSweep(t, e, 5, 3)
	step.Store(int64(2 * time.Hour))
	changeAndSweep(t, e, 10, 3)
	assertNothingLost(t, e)
}

// TestWatermarkAheadIsRewound: a watermark found ahead of server time minus
// settle (a clock put it there) is rewound, loudly, and the changes below
// it are published.
func TestWatermarkAheadIsRewound(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{})
	e.sim.Generate(50, t0.Add(-24*time.Hour), t0.Add(-time.Minute))
	e.sweep()
	ahead := t0.Add(2 * time.Hour)
	if err := e.store.Commit(state.Commit{Watermark: &ahead}); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(10 * time.Second)
	changed := 0
	for _, o := range e.sim.Orders()[:5] {
		if !order.MustDecimal(o.StatusID).Equal(order.MustDecimal("8")) {
			changed++
		}
		e.sim.SetStatus(o.ID, "8")
	}
	e.clk.Advance(10 * time.Second)
	st := e.sweep()
	if !st.Rewound.Equal(ahead) || !st.Watermark.Before(e.clk.Now()) {
		t.Errorf("rewound %v, watermark %v; want the watermark %v rewound to before now", st.Rewound, st.Watermark, ahead)
	}
	if n := len(e.events()); n != changed {
		t.Errorf("%d events for %d changes below the bad watermark", n, changed)
	}
	e.assertSnapshotMatches()
}

// TestEmptyWindowIsAClockProblem: hi <= lo is never a verified sweep.
func TestEmptyWindowIsAClockProblem(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{StartFrom: t0.Add(time.Hour)})
	e.sim.Generate(5, t0.Add(-24*time.Hour), t0.Add(-time.Minute))
	_, err := e.poll.Sweep(context.Background())
	if !errors.Is(err, poller.ErrClock) {
		t.Fatalf("sweep with the start point ahead of the service's clock: %v; want ErrClock", err)
	}
}

// TestLateArrivalsMeasured: an entry that becomes visible in the overlap
// with an updatedAt below the watermark is counted as a late arrival.
func TestLateArrivalsMeasured(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{Overlap: 30 * time.Second})
	e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
	e.sweep()
	e.clk.Advance(20 * time.Second)
	st := e.sweep()
	if len(st.LateArrivals) != 0 {
		t.Fatalf("late arrivals %v in a quiet sweep", st.LateArrivals)
	}
	late := e.sim.AddOrder(plentysim.Order{CreatedAt: st.Watermark.Add(-time.Hour), UpdatedAt: st.Watermark.Add(-25 * time.Second)})
	e.clk.Advance(5 * time.Second)
	st = e.sweep()
	if len(st.LateArrivals) != 1 || st.LateArrivals[0] != 25*time.Second {
		t.Errorf("late arrivals %v; want one of 25s (order %d)", st.LateArrivals, late.ID)
	}
}

// TestProgressPageByPage: a long first sync reports every call and every
// verified slice, and its share of the first sync rises to 1.
func TestProgressPageByPage(t *testing.T) {
	var mu sync.Mutex
	var seen []poller.Progress
	var logs bytes.Buffer
	e := newEnv(t, plentysim.Config{MaxItemsPerPage: 50}, poller.Config{ItemsPerPage: 50, SlicePages: 2,
		OnProgress:    func(p poller.Progress) { mu.Lock(); seen = append(seen, p); mu.Unlock() },
		ProgressEvery: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	e.sim.Generate(2000, t0.Add(-20*24*time.Hour), t0.Add(-time.Minute))
	st := e.sweep()
	calls, last := 0, -1.0
	positions := map[time.Time]bool{}
	for _, p := range seen {
		calls += p.NewCalls
		if p.FirstSync >= 0 {
			if p.FirstSync < last {
				t.Fatalf("first-sync share went back from %v to %v", last, p.FirstSync)
			}
			last = p.FirstSync
		}
		positions[p.Position] = true
	}
	if calls != st.Calls || last != 1 || len(positions) < st.Slices/2 {
		t.Errorf("progress: %d calls reported of %d, first sync at %v, %d positions for %d slices", calls, st.Calls, last, len(positions), st.Slices)
	}
	// The sweep took several seconds of the fake clock (the pacer's spacing):
	// progress lines every second, each with an estimate of what is left.
	if n := strings.Count(logs.String(), "sweep in progress"); n < 2 || strings.Count(logs.String(), "eta=") != n {
		t.Errorf("%d progress lines in a sweep of %v:\n%s", n, st.Duration, logs.String())
	}
}
