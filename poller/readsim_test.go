package poller_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/state"
)

// The proof of the read ledger: a seeded randomized simulation on the fake
// clock and the simulator, judged by the simulator's truth. The default
// run is short (the suite's time budget); the long mode runs many
// simulated hours:
//
//	go test ./poller -run TestReadLedgerSimulation -timeout 0 -v -args -sim-hours=1000 -sim-busy
//	make sim-reads SIM_HOURS=1000
//
// and one seed is replayed with -args -sim-seed=N -sim-minutes=M.
var (
	simHours   = flag.Float64("sim-hours", 0, "read-ledger simulation: simulated hours in all (long mode; 0: the default short run)")
	simSeed    = flag.Uint64("sim-seed", 0, "read-ledger simulation: replay this seed only")
	simMinutes = flag.Int("sim-minutes", 0, "read-ledger simulation: simulated minutes a seed runs (0: 12, or 60 in the long mode)")
	simBusy    = flag.Bool("sim-busy", false, "read-ledger simulation: every seed a busy shop (20 changes a second)")
	simFirst   = flag.Uint64("sim-first", 1001, "read-ledger simulation, long mode: the first seed")
	// simServiceSteps: the service's clock steps back now and then.
	simServiceSteps = flag.Bool("sim-service-steps", false, "read-ledger simulation: the service's clock steps back now and then (off: see docs/benchmarks.md, the read ledger)")
)

// TestReadLedgerSimulation: quiet and busy shops at the defaults, the
// service's clock up to 15 minutes ahead or behind, changes visible up to
// 5 minutes after their stamp (bulk seconds of up to 10,000 orders among
// them), searches that fail or are cut, the local clock stepped either
// way, restarts at random instants (inside second looks and probes too).
// Every change within the promise that the ledger says was read has
// exactly one event, and none has two: the ledger never claims a stretch
// that was not read; every change below the watermark that was visible
// when the sweeps read it has its event.
func TestReadLedgerSimulation(t *testing.T) {
	minutes := *simMinutes
	if minutes == 0 {
		minutes = 12
		if *simHours > 0 {
			minutes = 60
		}
	}
	if *simSeed != 0 {
		runReadSim(t, *simSeed, minutes)
		return
	}
	seeds := []uint64{1, 2}
	if *simHours > 0 {
		seeds = nil
		for s := *simFirst; float64(len(seeds)*minutes) < *simHours*60; s++ {
			seeds = append(seeds, s)
		}
	}
	var busy atomic.Int64
	// The seeds are independent worlds (each its own simulator, state
	// file and fake clock): they run side by side.
	t.Cleanup(func() {
		t.Logf("%d seeds of %d simulated minutes, %.1f busy hours", len(seeds), minutes, float64(busy.Load())/60)
	})
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("replay: go test ./poller -run 'TestReadLedgerSimulation' -args -sim-seed=%d -sim-minutes=%d", seed, minutes)
				}
			})
			if runReadSim(t, seed, minutes) {
				busy.Add(int64(minutes))
			}
		})
	}
}

// readSim is one seed's world.
type readSim struct {
	t     *testing.T
	rnd   *rand.Rand
	e     *env
	ahead atomic.Int64 // the service's clock minus the local one
	busy  bool
	// calm: restarts (between two sweeps, inside a read, for a clock
	// step) are rare: a restarted process's first sweeps read the whole
	// overlap, and would find what a long-running one owes.
	calm bool
	// busyFrom: a busy shop is quiet until then (its probes done, the
	// ledger's floor close below the watermark when it turns busy).
	busyFrom time.Time

	// proxy faults: failOld fails searches below the sweeps' window (second
	// looks, probes) with this chance; cancelOld cancels Run inside one.
	failOld   atomic.Int64 // per mille
	cancelOld atomic.Bool
	cancelMu  sync.Mutex
	cancel    context.CancelFunc

	step         time.Duration     // the local clock steps by this before the next process
	serviceSteps int               // the service's clock stepped back
	changes      map[int64]visible // every order added, with when it became visible
	lastAdd      time.Time         // service time
	restarts     int

	// Takeovers (readsim_takeover_test.go): the events in the stream by
	// id (their order), the group's last checkpoints.
	published map[string]int64
	ckpts     []state.Checkpoint
	takeovers int
	// unpublished: the active died before its publisher drained what a
	// second look had just found (afterLook); a successor takes over.
	unpublished int
	died        bool
	// damaged counts the restarts that warned of a damaged read ledger:
	// no state file this simulation writes is.
	damaged atomic.Int64
}

// visible is when an order became visible: the watermark then (zero:
// at once, stamped now).
type visible struct {
	watermark time.Time
	late      time.Duration
	overlap   time.Duration // in force when it became visible
}

func (s *readSim) now() time.Time { return s.e.clk.Now().Add(time.Duration(s.ahead.Load())) }

// runReadSim runs one seed for minutes of simulated time; it says whether
// the shop was busy.
func runReadSim(t *testing.T, seed uint64, minutes int) bool {
	rnd := rand.New(rand.NewPCG(seed, 32))
	s := &readSim{t: t, rnd: rnd, busy: rnd.IntN(2) == 0 || *simBusy, changes: map[int64]visible{}, published: map[string]int64{}}
	s.ahead.Store(int64(time.Duration(rnd.IntN(31)-15) * time.Minute))
	s.calm = rnd.IntN(2) == 0
	if rnd.IntN(2) == 0 {
		s.busyFrom = t0.Add(time.Duration(rnd.IntN(minutes/2+1)) * time.Minute)
	}
	clk := &clock{t: t0}
	e := newEnvAhead(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}, Seed: int64(seed)}, poller.Config{}, 0)
	s.e = e
	// The simulator follows the service's clock (ahead of the local one by
	// s.ahead, which a local clock step changes).
	e.clk = clk
	sim := plentysim.New(plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}, Seed: int64(seed), Now: s.now})
	e.sim = sim
	e.cfg.Now, e.cfg.Sleep = clk.Now, clk.Sleep
	sim.Generate(20, s.now().Add(-24*time.Hour), s.now().Add(-time.Hour))
	sim.SetFaults(plentysim.Faults{ServerErrorRate: 0.02, TruncateRate: 0.01})
	s.serve()
	s.lastAdd = s.now()
	end := clk.Now().Add(time.Duration(minutes) * time.Minute)
	quietUntil := end.Add(-3 * time.Minute) // no faults, no late changes: what is owed is read
	t.Logf("seed %d: busy %v, calm %v, service clock ahead by %v, %d minutes", seed, s.busy, s.calm, time.Duration(s.ahead.Load()), minutes)
	for clk.Now().Before(end) {
		s.process(end, quietUntil)
	}
	s.judge()
	return s.busy
}

// serve puts a proxy in front of the simulator that fails or cancels the
// searches below the sweeps' window at random.
func (s *readSim) serve() {
	e := s.e
	var n atomic.Uint64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if searchBelow(r, s.now().Add(-40*time.Second)) {
			if k := n.Add(1); int64(k*7919%1000) < s.failOld.Load() {
				serverError(w)
				return
			}
			if s.cancelOld.CompareAndSwap(true, false) {
				s.cancelMu.Lock()
				s.cancel()
				s.cancelMu.Unlock()
			}
		}
		e.sim.ServeHTTP(w, r)
	}))
	s.t.Cleanup(proxy.Close)
	e.srv = proxy
}

// process is one process: a new client and poller on the same state file,
// Run until a restart (or the end).
func (s *readSim) process(end, quietUntil time.Time) {
	t, e := s.t, s.e
	cfg := e.cfg
	cfg.Logger = slog.New(slog.NewTextHandler(logCounter{t, damagedLedger, &s.damaged}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e.restartFailFast(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.cancelMu.Lock()
	s.cancel = cancel
	s.cancelMu.Unlock()
	tm := poller.NewTimings(poller.TimingsConfig{Records: e.store})
	err := e.poll.Run(ctx, poller.RunConfig{
		CallShare: 0.25, Throttle: e.client.Throttle, Timings: tm, Calls: e.client.Calls, Records: e.store,
		OnSweep: func(st poller.Stats, _ error) {
			if !e.clk.Now().Before(end) {
				cancel()
				return
			}
			if *simSeed != 0 && testing.Verbose() {
				t.Logf("sweep at %s: wm %s lo %s hi %s look %v probe %v overlap %v: %s", e.clk.Now().Format(time.TimeOnly), st.Watermark.UTC().Format(time.TimeOnly),
					st.Lo.UTC().Format(time.TimeOnly), st.Hi.UTC().Format(time.TimeOnly), st.SecondLook, st.Probe, st.Timings.Overlap, e.poll.LedgerString())
			}
			if s.dieUnpublished(st) {
				cancel() // its outbox (the look's finds) stays unpublished
				return
			}
			s.publish()
			s.afterSweep(st, quietUntil, cancel)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.restarts++
	if e.clk.Now().Before(end) && (s.died || s.rnd.IntN(2) == 0) {
		s.takeOver() // another replica goes on, from the group's checkpoint
	}
	s.died = false
	if s.step != 0 {
		e.clk.Advance(s.step)
		s.ahead.Add(-int64(s.step))
		s.step = 0
	}
}

// dieUnpublished says the active dies now, before its publisher drains
// the outbox, after a second look that found late changes: half the
// time. The successor restores the group's checkpoint, whose ledger
// does not claim what the dead look read (its finds are undone): a
// successor that kept the dead active's newer ledger would never read
// them again.
func (s *readSim) dieUnpublished(st poller.Stats) bool {
	if !st.SecondLook || len(st.LateArrivals) == 0 || s.rnd.IntN(2) != 0 {
		return false
	}
	s.unpublished++
	s.died = true
	return true
}

// afterSweep adds the changes of the time to the next sweep, late ones at
// random, and the faults of the next moments.
func (s *readSim) afterSweep(st poller.Stats, quietUntil time.Time, cancel context.CancelFunc) {
	rnd, e := s.rnd, s.e
	quiet := !e.clk.Now().Before(quietUntil)
	until := s.now().Add(st.NextGap)
	rate := 0.2
	if s.busy && !e.clk.Now().Before(s.busyFrom) {
		rate = 20
	}
	if n := int(until.Sub(s.lastAdd).Seconds() * rate); n > 0 {
		for i := range n {
			at := s.lastAdd.Add(time.Duration(i+1) * until.Sub(s.lastAdd) / time.Duration(n))
			s.changes[e.sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at}).ID] = visible{}
		}
		s.lastAdd = until
	}
	if quiet || st.Watermark.IsZero() {
		s.failOld.Store(0)
		e.sim.SetFaults(plentysim.Faults{})
		return
	}
	// Late changes: stamped below the watermark, visible now.
	if rnd.IntN(8) == 0 {
		late := time.Duration(rnd.Int64N(int64(st.Timings.Overlap))) + time.Second
		if rnd.IntN(3) == 0 {
			late = time.Duration(rnd.Int64N(int64(5*time.Minute))) + time.Second // for the probes
		}
		if f := st.Watermark.Sub(e.poll.LedgerFloor()); rnd.IntN(4) == 0 && f > 0 && f+30*time.Second <= st.Timings.Overlap {
			// Just below the ledger's floor, within the overlap: the floor
			// claims every promised age below it (one widened since it
			// moved included).
			late = f + time.Duration(rnd.IntN(30)+1)*time.Second
		}
		k := 1
		if rnd.IntN(40) == 0 {
			k = 1000 + rnd.IntN(9001) // a bulk second
		}
		at := st.Watermark.Add(-late)
		for range k {
			s.changes[e.sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at}).ID] = visible{watermark: st.Watermark, late: late, overlap: st.Timings.Overlap}
		}
	}
	// Faults of the next moments.
	s.failOld.Store(int64([]int{0, 0, 0, 100, 500, 1000}[rnd.IntN(6)]))
	rare := 1
	if s.calm {
		rare = 20
	}
	s.cancelOld.Store(rnd.IntN(60*rare) == 0) // a restart inside a second look or a probe
	if rnd.IntN(400) == 0 && *simServiceSteps {
		// The service's clock steps back: its new changes are stamped
		// below the watermark (the sweep finds them and rewinds).
		d := time.Duration(rnd.IntN(290)+10) * time.Second
		s.ahead.Add(-int64(d))
		s.lastAdd = s.now()
		s.serviceSteps++
		s.t.Logf("the service's clock steps back by %v at %v (service %v), watermark %v", d, e.clk.Now().Sub(t0), s.now().Sub(t0), st.Watermark.Sub(t0))
	}
	if rnd.IntN(150*rare) == 0 {
		// The local clock steps, ahead or back, while no process runs
		// (within one the durations are on the monotonic clock): the
		// next process starts on it; the service's clock does not move.
		d := time.Duration(rnd.IntN(1200)-600) * time.Second
		s.step = d
		cancel()
	}
	if rnd.IntN(80*rare) == 0 {
		cancel() // a restart between two sweeps
	}
}

// judge checks the simulator's truth against the events and the ledger.
func (s *readSim) judge() {
	t, e := s.t, s.e
	count := s.eventsByOrder()
	meta, err := e.store.Meta()
	if err != nil {
		t.Fatal(err)
	}
	bad, owed, late := 0, 0, 0
	for id, v := range s.changes {
		o, _ := e.sim.Order(id)
		n := count[id]
		if n > 1 {
			t.Errorf("order %d (stamped %v, %v late) has %d events; want one", id, o.UpdatedAt.Sub(t0), v.late, n)
			bad++
		}
		if v.late > 0 {
			late++
		}
		if n == 1 || o.UpdatedAt.After(meta.Watermark) || !o.UpdatedAt.After(meta.Baseline) {
			continue // published, not reached yet, or in the first sync's silent baseline
		}
		age, ok := poller.ClaimedAge(e.store, o.UpdatedAt)
		switch {
		case v.late == 0:
			// Visible before any sweep read its second.
			t.Errorf("order %d stamped %v below the watermark has no event", id, o.UpdatedAt.Sub(t0))
			bad++
		case ok && age >= v.late && (v.late <= v.overlap || age >= 5*time.Minute):
			// A claim at the overlap's age promises the changes within the
			// overlap in force when they became visible (what was read at
			// the overlap keeps its promise when the overlap changes,
			// ledger.relevel); one at the probes' age, every change up to
			// it.
			t.Errorf("order %d stamped %v, visible %v late, has no event: the ledger claims its second read at %v", id, o.UpdatedAt.Sub(t0), v.late, age)
			bad++
		default:
			owed++ // not read yet at its age: the ledger owes it
		}
		if bad > 10 {
			t.Fatalf("stopping after %d failures", bad)
		}
	}
	if n := s.damaged.Load(); n > 0 {
		t.Errorf("%d of %d restarts warned of a damaged read ledger; the state file is healthy", n, s.restarts)
	}
	t.Logf("%d damaged-ledger warnings; %d changes (%d late), %d still owed a read at their age, %d restarts (%d takeovers, %d with a second look's finds unpublished), the service's clock stepped back %d times", s.damaged.Load(), len(s.changes), late, owed, s.restarts, s.takeovers, s.unpublished, s.serviceSteps)
}

// TestReadLedgerCosts measures (READS_COST=1, a few minutes) what the
// re-reads cost at the defaults over READS_COST_HOURS simulated hours
// (default 3, the first half hour not counted) in a quiet shop (a change
// every 10 s) and a busy one (20 a second): the sweeps' spacing, the calls
// a day, and the probes' slices (one call each) per probe, with no fault
// and no late change (docs/benchmarks.md, the read ledger).
func TestReadLedgerCosts(t *testing.T) {
	if os.Getenv("READS_COST") == "" {
		t.Skip("set READS_COST=1 to measure (minutes)")
	}
	hours, _ := strconv.Atoi(os.Getenv("READS_COST_HOURS"))
	if hours <= 0 {
		hours = 3
	}
	for _, rate := range []float64{0.1, 20} {
		t.Run(fmt.Sprintf("%g_per_second", rate), func(t *testing.T) {
			e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}}, poller.Config{})
			e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
			tm := poller.NewTimings(poller.TimingsConfig{Records: e.store})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			from, end := t0.Add(30*time.Minute), t0.Add(time.Duration(hours)*time.Hour)
			last := e.clk.Now()
			var (
				gaps                  []time.Duration
				prev                  time.Time
				calls, looks, nslices int
				probes                int
				lastProbe             time.Time
				owed                  time.Duration
			)
			err := e.poll.Run(ctx, poller.RunConfig{
				CallShare: 0.25, Throttle: e.client.Throttle, Timings: tm, Calls: e.client.Calls,
				OnSweep: func(st poller.Stats, _ error) {
					last = addEvenly(e.sim, last, st.Start.Add(st.NextGap), rate)
					if st.Start.Before(from) {
						prev, lastProbe = st.Start, st.Timings.LastProbe
						return
					}
					gaps = append(gaps, st.Start.Sub(prev))
					prev = st.Start
					calls += st.Charged
					owed = max(owed, st.ReadOwed)
					if st.SecondLook {
						looks++
					}
					if st.Probe {
						nslices++
					}
					if !st.Timings.LastProbe.Equal(lastProbe) {
						probes++
						lastProbe = st.Timings.LastProbe
					}
					if !st.Start.Before(end) {
						cancel()
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			slices2 := slices.Clone(gaps)
			slices2 = slices.DeleteFunc(slices2, func(d time.Duration) bool { return d <= 0 })
			slices.Sort(slices2)
			var sum time.Duration
			for _, g := range slices2 {
				sum += g
			}
			span := end.Sub(from).Seconds()
			perProbe := 0.0
			if probes > 0 {
				perProbe = float64(nslices) / float64(probes)
			}
			t.Logf("%g changes/s, %d h: %d sweeps, mean spacing %.2f s, p50 %.2f s, p90 %.2f s, p99 %.2f s, max %.2f s; %d calls = %.0f a day; %d second looks; %d probes ended, %d probe slices (%.1f a probe); read owed at most %v",
				rate, hours, len(slices2), (sum / time.Duration(len(slices2))).Seconds(), slices2[len(slices2)/2].Seconds(), slices2[len(slices2)*9/10].Seconds(), slices2[len(slices2)*99/100].Seconds(), slices2[len(slices2)-1].Seconds(),
				calls, float64(calls)/span*86400, looks, probes, nslices, perProbe, owed)
		})
	}
}
