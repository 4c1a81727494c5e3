package poller_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// busyRun drives a busy shop on the fake clock through the real Run loop
// at the defaults (derived pace, settle and overlap), restarting Run on
// the same state file as a new process does (a new client, poller,
// Timings and a budget restored from its last snapshot), and injecting
// commits that become visible late: stamped 6, 8 or 9.5 s below the
// watermark of the sweep they become visible after (within the overlap,
// beyond the sweeps' 5 s while split).
type busyRun struct {
	sweeps int // sweeps in all
	// rate is the changes a second at sweep n.
	rate func(n int) int
	// restart says whether to stop Run after sweep n (a restart).
	restart func(n int, st poller.Stats) bool
	// failLooks: after a late commit is injected, the searches below the
	// overlap (the second looks, the probes) fail for the next failLooks
	// sweeps.
	failLooks int
	// cancelInLook: ctx is cancelled while a second look's call is in
	// flight (a shutdown during it), at random.
	cancelInLook bool
	faults       plentysim.Faults
	seed         uint64
	// ahead: the service's clock is ahead of the local one by this much.
	ahead time.Duration
	// inject, when set, adds changes after sweep n (stamped in the
	// service's time) and returns their ids: each must have an event.
	inject func(n int, st poller.Stats, sim *plentysim.Server) []int64
}

type busyResult struct {
	sweeps        []poller.Stats
	late          []int64
	lateAt        map[int64]time.Duration // its lateness
	beyond        int64
	restarts      int
	split, whole  int // sweeps read 5 s / more below the watermark
	looks, errors int
}

func (b busyRun) run(t *testing.T) busyResult {
	t.Helper()
	e := newEnvAhead(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}}, poller.Config{}, b.ahead)
	e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
	rnd := rand.New(rand.NewPCG(b.seed, 27))
	var (
		failOld    atomic.Bool
		cancelMu   sync.Mutex
		cancelRun  context.CancelFunc
		cancelLook atomic.Bool
	)
	// The searches whose window ends more than settle + 8 s below the
	// service's clock are a second look's or a probe's (a sweep's ends
	// settle below it, a second look's settle plus the overlap, 10 s or
	// more).
	var settle atomic.Int64
	old := func(r *http.Request) bool {
		return searchBelow(r, e.clk.Now().Add(b.ahead-time.Duration(settle.Load())-8*time.Second))
	}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if old(r) {
			if failOld.Load() {
				serverError(w)
				return
			}
			if cancelLook.CompareAndSwap(true, false) {
				cancelMu.Lock()
				cancelRun()
				cancelMu.Unlock()
			}
		}
		e.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	e.srv = proxy
	var overlapWarnings atomic.Int64
	restart := func() {
		// A new process, its client giving up on a failing call at once.
		cfg := e.cfg
		cfg.Logger = slog.New(slog.NewTextHandler(tWriter{t, &overlapWarnings}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		e.restartFailFast(cfg)
	}
	restart()
	e.sim.SetFaults(b.faults)

	res := busyResult{lateAt: map[int64]time.Duration{}}
	added := map[int64]bool{}
	lastAdd := e.clk.Now().Add(b.ahead) // the service's time
	addChanges := func(until time.Time, perSecond int) {
		until = until.Add(b.ahead)
		n := int(until.Sub(lastAdd).Seconds() * float64(perSecond))
		for i := range n {
			at := lastAdd.Add(time.Duration(i+1) * until.Sub(lastAdd) / time.Duration(n))
			added[e.sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at}).ID] = true
		}
		lastAdd = until
	}
	lateness := []time.Duration{6 * time.Second, 8 * time.Second, 9500 * time.Millisecond}
	var saved *poller.BudgetState
	failUntil := 0
	for len(res.sweeps) < b.sweeps {
		ctx, cancel := context.WithCancel(context.Background())
		cancelMu.Lock()
		cancelRun = cancel
		cancelMu.Unlock()
		budget := poller.NewBudget(0.25)
		if saved != nil {
			budget.Restore(*saved, e.clk.Now())
		}
		tm := poller.NewTimings(poller.TimingsConfig{Records: e.store})
		err := e.poll.Run(ctx, poller.RunConfig{
			CallShare: 0.25, Throttle: e.client.Throttle, Timings: tm, Budget: budget, Calls: e.client.Calls,
			OnBudget: func(s poller.BudgetState) { saved = &s },
			OnSweep: func(st poller.Stats, err error) {
				n := len(res.sweeps)
				res.sweeps = append(res.sweeps, st)
				if err != nil {
					res.errors++
				}
				if n > 0 && err == nil && !st.Watermark.IsZero() {
					if st.Lo.Equal(res.sweeps[n-1].Watermark.Add(-5 * time.Second)) {
						res.split++
					} else {
						res.whole++
					}
				}
				if st.SecondLook {
					res.looks++
				}
				if testing.Verbose() && n > 0 {
					t.Logf("sweep %d at %v: lo wm-%v, hi-lo %v, pages %d, entries %d, charged %d, look %v, probe %v, gap %v, late %v, err %v",
						n, st.Start.Sub(t0), res.sweeps[n-1].Watermark.Sub(st.Lo), st.Hi.Sub(st.Lo), st.Pages, st.Entries, st.Charged, st.SecondLook, st.Probe, st.NextGap, st.LateArrivals, err)
				}
				res.beyond = st.Timings.BeyondOverlap
				settle.Store(int64(st.Timings.Settle))
				cancelLook.Store(b.cancelInLook && n > 40 && rnd.IntN(30) == 0)
				// The last 30 sweeps after the last failure inject nothing:
				// a second look that trails (its calls failed) catches up.
				if n > 40 && n < b.sweeps-30-b.failLooks && !st.Watermark.IsZero() && rnd.IntN(6) == 0 {
					if b.failLooks > 0 && n >= failUntil {
						failUntil = n + b.failLooks
					}
					l := lateness[rnd.IntN(len(lateness))]
					at := st.Watermark.Add(-l)
					id := e.sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at}).ID
					if testing.Verbose() {
						t.Logf("INJECT %d at %s (watermark %s) now %s", id, at.UTC().Format(time.TimeOnly), st.Watermark.UTC().Format(time.TimeOnly), e.clk.Now().UTC().Format(time.TimeOnly))
					}
					res.late = append(res.late, id)
					res.lateAt[id] = l
					added[id] = true
				}
				if b.inject != nil {
					for _, id := range b.inject(n, st, e.sim) {
						res.late = append(res.late, id)
						added[id] = true
					}
				}
				failOld.Store(n < failUntil)
				addChanges(st.Start.Add(st.NextGap), b.rate(n))
				if len(res.sweeps) >= b.sweeps || (b.restart != nil && b.restart(n, st)) {
					cancel()
				}
			},
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(res.sweeps) < b.sweeps {
			res.restarts++
			restart()
		}
	}
	// The late commits stamped more than a minute below the last watermark
	// (found by a second look, or by a first sweep after a restart) have
	// their events; so has every change below it.
	last := res.sweeps[len(res.sweeps)-1].Watermark
	published := map[int64]bool{}
	for _, ev := range e.events() {
		published[ev.Data.OrderID] = true
	}
	lost := 0
	for _, id := range res.late {
		o, _ := e.sim.Order(id)
		if !published[id] && o.UpdatedAt.Before(last.Add(-time.Minute)) {
			if lost++; lost <= 5 {
				t.Errorf("the commit %d visible %v late (stamped %v) has no event", id, res.lateAt[id], o.UpdatedAt.Sub(t0))
			}
		}
	}
	if lost > 5 {
		t.Errorf("%d late commits in all have no event", lost)
	}
	if lost > 0 {
		t.Logf("last watermark %s, read ledger: %s", last.UTC().Format(time.TimeOnly), e.poll.LedgerString())
	}
	missed := 0
	for id := range added {
		o, _ := e.sim.Order(id)
		if !published[id] && o.UpdatedAt.Before(last.Add(-time.Minute)) {
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("%d changes below the watermark have no event", missed)
	}
	// Every late commit was within the overlap, half of it or less beyond
	// the sweeps' 5 s: none is close to the overlap, but for one found by
	// the whole-overlap sweeps a restarted process starts with (before it
	// measured the density that splits them), one a restart.
	if n := overlapWarnings.Load(); n > int64(res.restarts) {
		t.Errorf("%d warnings that a change arrived close to the overlap; want none (found by the second look, late by at most 9.5 s)", n)
	}
	if res.beyond != 0 {
		t.Errorf("%d changes counted beyond the overlap; want none (every late commit was within it)", res.beyond)
	}
	t.Logf("%d sweeps (%d split, %d whole, %d errors), %d second looks, %d restarts, %d late commits, %d beyond the overlap",
		len(res.sweeps), res.split, res.whole, res.errors, res.looks, res.restarts, len(res.late), res.beyond)
	return res
}

// TestSecondLookSurvivesRestarts: a busy shop (split on), late commits at
// 6, 8 and 9.5 s, Run restarted at random moments, right after a sweep
// that left the second look pending included, and shut down at random
// while a second look's call is in flight.
func TestSecondLookSurvivesRestarts(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(3, 4))
	res := busyRun{
		sweeps:       150,
		seed:         1,
		rate:         func(int) int { return 20 },
		restart:      func(n int, st poller.Stats) bool { return n > 40 && !st.SecondLook && rnd.IntN(25) == 0 },
		cancelInLook: true,
	}.run(t)
	if res.split < 50 || res.looks < 10 || res.restarts < 3 || len(res.late) < 5 {
		t.Errorf("%d split and %d whole sweeps, %d restarts, %d late commits: the test did not exercise the split", res.split, res.whole, res.restarts, len(res.late))
	}
}

// TestSecondLookAcrossSplitSwitches: the density falls (the sweeps read
// the whole overlap) and rises again (split), with restarts.
func TestSecondLookAcrossSplitSwitches(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(5, 6))
	rate := func(n int) int {
		switch {
		case n < 60, n >= 95:
			return 20
		}
		return 1
	}
	res := busyRun{
		sweeps:  140,
		seed:    2,
		rate:    rate,
		restart: func(n int, _ poller.Stats) bool { return n > 40 && rnd.IntN(40) == 0 },
	}.run(t)
	if res.split < 30 || res.whole < 20 {
		t.Errorf("%d split and %d whole sweeps: the test did not switch", res.split, res.whole)
	}
	// The density rose again at sweep 95: the sweeps split again (the
	// overlap the late commits widened past a minute must not stop it).
	split := 0
	for n := 115; n < len(res.sweeps); n++ {
		if res.sweeps[n].Lo.Equal(res.sweeps[n-1].Watermark.Add(-5 * time.Second)) {
			split++
		}
	}
	if split < 10 {
		t.Errorf("%d of the last %d sweeps (20 changes a second) read 5 s below the watermark; want the split back", split, len(res.sweeps)-115)
	}
}

// TestSecondLookThroughErrors: search faults (5xx, garbage) while split,
// and second looks whose calls fail for a while (the service errs on the
// older windows only): nothing is missed, nothing counted beyond the
// overlap.
func TestSecondLookThroughErrors(t *testing.T) {
	t.Parallel()
	res := busyRun{
		sweeps:    150,
		seed:      3,
		rate:      func(int) int { return 20 },
		failLooks: 6,
		faults:    plentysim.Faults{ServerErrorRate: 0.05, GarbageRate: 0.05},
	}.run(t)
	if res.errors == 0 || res.looks < 10 {
		t.Errorf("%d sweep errors, %d second looks: the test did not exercise them", res.errors, res.looks)
	}
}

// tWriter writes a log to the test's (-v) and counts the warnings that
// a change came close to the overlap.
type tWriter struct {
	t    *testing.T
	near *atomic.Int64
}

func (w tWriter) Write(b []byte) (int, error) {
	if strings.Contains(string(b), "close to WATCHER_OVERLAP") {
		w.near.Add(1)
	}
	if testing.Verbose() {
		w.t.Log(strings.TrimSpace(string(b)))
	}
	return len(b), nil
}

// TestSecondLookFailingThenRestart: second looks fail for a while (the
// window left to read trails), then the process restarts: a commit in
// the trailing window is still found within the overlap.
func TestSecondLookFailingThenRestart(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(7, 8))
	busyRun{
		sweeps:    150,
		seed:      4,
		rate:      func(int) int { return 20 },
		failLooks: 25,
		restart:   func(n int, _ poller.Stats) bool { return n > 40 && rnd.IntN(15) == 0 },
	}.run(t)
}

// TestSecondLookGoesOnAfterARestart: second looks fail for minutes (the
// searches below the overlap are refused) while the sweeps go on, and the
// process restarts twice while the second look trails by more than the
// minute a first sweep reads again: the restarted process goes on from
// where the second look got (kept in the budget's record), so every late
// commit is found within the overlap, none counted beyond it.
func TestSecondLookGoesOnAfterARestart(t *testing.T) {
	t.Parallel()
	restartsWhileLooksFail(t, 0)
}

// restartsWhileLooksFail: second looks fail for 40 sweeps from sweep 40
// on, the process restarts at sweeps 90 and 125; the service's clock is
// ahead of the local one by ahead.
func restartsWhileLooksFail(t *testing.T, ahead time.Duration) {
	res := busyRun{
		sweeps:    230,
		seed:      11,
		ahead:     ahead,
		rate:      func(int) int { return 20 },
		failLooks: 40,
		restart:   func(n int, _ poller.Stats) bool { return n == 90 || n == 125 },
	}.run(t)
	if res.restarts != 2 {
		t.Fatalf("%d restarts; want 2", res.restarts)
	}
}

// searchBelow says whether r is an order search whose updatedAt window
// ends before limit (a second look's or a probe's: a sweep's ends settle
// below the service's clock).
func searchBelow(r *http.Request, limit time.Time) bool {
	if !strings.HasSuffix(r.URL.Path, "/orders/search") {
		return false
	}
	v := r.URL.Query().Get("updatedAt")
	i := strings.LastIndex(v, ",")
	if i < 0 {
		return false
	}
	to, err := time.Parse("2006-01-02T15:04:05-07:00", v[i+1:])
	return err == nil && to.Before(limit)
}

// serverError answers as the service does with a 500.
func serverError(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusInternalServerError)
	w.Write([]byte(`{"error":{"message":"Internal Server Error","code":500}}`))
}
