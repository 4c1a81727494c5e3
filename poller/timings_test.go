package poller_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/state"
)

func openStore(t *testing.T, path string) *state.Store {
	t.Helper()
	s, err := state.Open(path, state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTimingsFromLateArrivals: nothing known, settle and overlap are at
// their floor and the first sweep probes; a late arrival widens them at
// once; without more they shrink a fifth every 10 minutes, never below the
// floor; what was measured survives a restart (a real state file).
func TestTimingsFromLateArrivals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	store := openStore(t, path)
	tm := poller.NewTimings(poller.TimingsConfig{Records: store})
	now := t0
	in := tm.InForce()
	if in.Settle != poller.SettleFloor || in.Overlap != poller.OverlapFloor || in.SettleSource != poller.SourceDefault || in.OverlapSource != poller.SourceDefault {
		t.Fatalf("nothing known: %+v; want the floors (default)", in)
	}
	if !tm.ProbeDue(now) {
		t.Fatal("nothing known: no probe due")
	}
	tm.Observe(now, nil, poller.SettleFloor, poller.OverlapFloor, true)
	if _, ov := tm.Next(); tm.ProbeDue(now.Add(time.Minute)) || ov != poller.OverlapFloor {
		t.Fatalf("a minute after a probe: overlap %v probe due %v; want the floor, no probe", ov, tm.ProbeDue(now.Add(time.Minute)))
	}
	if tm.ProbeDue(now.Add(5*time.Minute)) || !tm.ProbeDue(now.Add(10*time.Minute)) {
		t.Fatalf("after a probe that found nothing: due after 5 min %v, after 10 min %v; want the next in 10 minutes", tm.ProbeDue(now.Add(5*time.Minute)), tm.ProbeDue(now.Add(10*time.Minute)))
	}

	// One commit visible 8 s late under a 1 s settle (lag 9 s) widens
	// the overlap, not the settle; five of them widen both at once.
	now = now.Add(time.Minute)
	tm.Observe(now, []time.Duration{8 * time.Second}, poller.SettleFloor, poller.OverlapFloor, false)
	in = tm.InForce()
	if in.Settle != poller.SettleFloor || in.Overlap != 18*time.Second || in.OverlapSource != poller.SourceLate {
		t.Fatalf("after one lag of 9 s: settle %v overlap %v (%s); want the settle floor and 18s (late_arrivals)", in.Settle, in.Overlap, in.OverlapSource)
	}
	tm.Observe(now, []time.Duration{8 * time.Second, 7 * time.Second, 8 * time.Second, 8 * time.Second}, poller.SettleFloor, 18*time.Second, false)
	in = tm.InForce()
	if in.Settle != 9*time.Second || in.Overlap != 18*time.Second || in.SettleSource != poller.SourceLate {
		t.Fatalf("after five lags of 8-9 s: settle %v overlap %v (%s); want 9s and 18s at once (late_arrivals)", in.Settle, in.Overlap, in.SettleSource)
	}

	// Shrinking waits for the lag to age out (a day), then goes step by step.
	prev := in
	for i := 0; i < 20; i++ {
		now = now.Add(10 * time.Minute)
		tm.Observe(now, nil, prev.Settle, prev.Overlap, false)
	}
	if in = tm.InForce(); in != prev && in.Settle != prev.Settle {
		t.Fatalf("within the day of the lag: settle %v; want it kept at %v", in.Settle, prev.Settle)
	}
	now = now.Add(24 * time.Hour)
	tm.Observe(now, nil, prev.Settle, prev.Overlap, false)
	in = tm.InForce()
	if in.Settle != 7200*time.Millisecond || in.Overlap != 14400*time.Millisecond {
		t.Fatalf("after a day without late arrivals: settle %v overlap %v; want one step down (7.2s, 14.4s)", in.Settle, in.Overlap)
	}
	now = now.Add(time.Minute)
	tm.Observe(now, nil, in.Settle, in.Overlap, false)
	if got := tm.InForce(); got.Settle != in.Settle {
		t.Fatalf("a minute after a step: settle %v; want no step before 10 minutes (%v)", got.Settle, in.Settle)
	}
	for i := 0; i < 30; i++ {
		now = now.Add(10 * time.Minute)
		tm.Observe(now, nil, in.Settle, in.Overlap, false)
	}
	if in = tm.InForce(); in.Settle != poller.SettleFloor || in.Overlap != poller.OverlapFloor {
		t.Fatalf("hours later: settle %v overlap %v; want the floors", in.Settle, in.Overlap)
	}

	// A probe finds a change 3 minutes late (beyond the overlap in force):
	// counted, and the overlap widens at once; a restart keeps it.
	tm.Observe(now, []time.Duration{3 * time.Minute}, in.Settle, in.Overlap, true)
	in = tm.InForce()
	if in.BeyondOverlap != 1 || in.Overlap != 2*(3*time.Minute+poller.SettleFloor) || in.Settle != poller.SettleFloor {
		t.Fatalf("after a change 3 min late: %+v; want 1 beyond the overlap, overlap 6m4s, settle kept", in)
	}
	store.Close()
	store = openStore(t, path)
	defer store.Close()
	again := poller.NewTimings(poller.TimingsConfig{Records: store})
	if got := again.InForce(); got.Overlap != in.Overlap || got.Settle != in.Settle || got.BeyondOverlap != 1 || got.LateArrivals != in.LateArrivals {
		t.Fatalf("after a restart: %+v; want %+v", got, in)
	}
}

// TestProbesBackOffWhileTheyFindNothing: each probe that finds nothing
// doubles the time to the next, up to an hour, and its window grows with it
// (5 minutes late plus the time between probes); one that finds a change
// beyond the overlap brings the probes back to every 5 minutes; a restart
// keeps the pace.
func TestProbesBackOffWhileTheyFindNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	store := openStore(t, path)
	tm := poller.NewTimings(poller.TimingsConfig{Records: store})
	if w := tm.ProbeWindow(); w != 10*time.Minute {
		t.Fatalf("first probe's window %v; want 10m (5 minutes late, 5 minutes between probes)", w)
	}
	now := t0
	for _, want := range []time.Duration{10 * time.Minute, 20 * time.Minute, 40 * time.Minute, time.Hour, time.Hour} {
		tm.Observe(now, nil, poller.SettleFloor, poller.OverlapFloor, true)
		if tm.ProbeDue(now.Add(want-time.Second)) || !tm.ProbeDue(now.Add(want)) {
			t.Fatalf("after a probe that found nothing: next due %v later? want exactly %v", want, want)
		}
		if w := tm.ProbeWindow(); w != 5*time.Minute+want {
			t.Fatalf("window %v; want %v", w, 5*time.Minute+want)
		}
		now = now.Add(want)
	}
	store.Close()
	store = openStore(t, path)
	defer store.Close()
	tm = poller.NewTimings(poller.TimingsConfig{Records: store})
	if tm.ProbeDue(now.Add(-time.Minute)) || tm.InForce().ProbeEvery != time.Hour {
		t.Fatalf("after a restart: probes every %v; want the hour kept", tm.InForce().ProbeEvery)
	}
	// A slice of a probe finds a change 2 minutes late; the probe ends.
	tm.Observe(now, []time.Duration{2 * time.Minute}, poller.SettleFloor, poller.OverlapFloor, false)
	tm.Observe(now, nil, poller.SettleFloor, 2*(2*time.Minute+poller.SettleFloor), true)
	if !tm.ProbeDue(now.Add(5*time.Minute)) || tm.ProbeWindow() != 10*time.Minute {
		t.Fatalf("after a probe that found a change beyond the overlap: every %v, window %v; want 5m, 10m", tm.InForce().ProbeEvery, tm.ProbeWindow())
	}
}

// TestTimingsExplicitPinned: explicit settle and overlap are in force
// whatever is measured, and no probe is made; an unreadable record is
// nothing known.
func TestTimingsExplicitPinned(t *testing.T) {
	store := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	defer store.Close()
	if err := store.SaveRecord(poller.TimingsRecord, "not the shape"); err != nil {
		t.Fatal(err)
	}
	tm := poller.NewTimings(poller.TimingsConfig{Settle: 7 * time.Second, Overlap: 45 * time.Second, Records: store})
	tm.Observe(t0, []time.Duration{40 * time.Second}, 7*time.Second, 45*time.Second, false)
	settle, overlap := tm.Next()
	probe := tm.ProbeDue(t0.Add(time.Hour))
	in := tm.InForce()
	if settle != 7*time.Second || overlap != 45*time.Second || probe || in.SettleSource != poller.SourceExplicit || in.OverlapSource != poller.SourceExplicit {
		t.Fatalf("explicit 7s/45s: next %v/%v probe %v, in force %+v", settle, overlap, probe, in)
	}
	fresh := poller.NewTimings(poller.TimingsConfig{Records: openStore(t, filepath.Join(t.TempDir(), "other.db"))})
	if in := fresh.InForce(); in.Settle != poller.SettleFloor {
		t.Fatalf("fresh: %+v", in)
	}
}

// TestRunFindsLateArrivalBeyondOverlap runs the real sweep loop on a fake
// clock: the derived interval follows the budget (2.08 s at 0.25 of
// 166,000 a day), an order whose change becomes visible 2 minutes late
// (beyond the 10 s overlap in force) is found by the next probe (a slice
// after a sweep, the watermark untouched), published, counted, and widens
// the overlap at once.
func TestRunFindsLateArrivalBeyondOverlap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}}, poller.Config{})
	e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
	tm := poller.NewTimings(poller.TimingsConfig{Records: e.store})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sweeps []poller.Stats
	var late int64
	injected := false
	err := e.poll.Run(ctx, poller.RunConfig{
		CallShare: 0.25, Throttle: e.client.Throttle, Timings: tm,
		OnSweep: func(st poller.Stats, err error) {
			if err != nil {
				t.Errorf("sweep: %v", err)
			}
			if n := len(sweeps); n > 0 && st.Watermark.Before(sweeps[n-1].Watermark) {
				t.Errorf("the watermark went back from %v to %v (probe %v)", sweeps[n-1].Watermark, st.Watermark, st.Probe)
			}
			sweeps = append(sweeps, st)
			if !injected && len(sweeps) == 10 {
				// A commit made 2 minutes ago becomes visible only now.
				late = e.sim.AddOrder(plentysim.Order{CreatedAt: e.clk.Now().Add(-time.Hour), UpdatedAt: st.Watermark.Add(-2 * time.Minute)}).ID
				injected = true
			}
			if st.Timings.BeyondOverlap > 0 || len(sweeps) > 400 {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	last := sweeps[len(sweeps)-1]
	if last.Timings.BeyondOverlap != 1 || !last.Probe || last.Timings.Overlap < 4*time.Minute {
		t.Fatalf("after %d sweeps: %+v; want the late change found by a probe and the overlap widened", len(sweeps), last.Timings)
	}
	found := false
	for _, ev := range e.events() {
		found = found || ev.Data.OrderID == late
	}
	if !found {
		t.Errorf("no event for the order %d that arrived 2 minutes late", late)
	}
	if in := sweeps[5].Timings; in.Interval != 2082*time.Millisecond || in.IntervalSource != poller.SourceBudget || sweeps[5].NextGap != in.Interval {
		t.Errorf("sweep 5: interval %v (%s), gap %v; want 2.082s from the budget", in.Interval, in.IntervalSource, sweeps[5].NextGap)
	}
	t.Logf("found after %d sweeps (%v of fake time), overlap now %v, settle %v", len(sweeps), last.Start.Sub(sweeps[10].Start), last.Timings.Overlap, last.Timings.Settle)
}

// TestRunFindsLateArrivalWithinFloorAtNextSweep: nothing measured (the
// overlap at its floor), a change that becomes visible 8 s below the
// watermark is found by the very next sweep, not left to the probe
// minutes later: what the floor of the overlap buys (a shop's first late
// arrivals of up to about settle + floor are published within a sweep). A
// lower floor trades exactly this for cheaper sweeps (docs/benchmarks.md,
// "The busy defaults").
func TestRunFindsLateArrivalWithinFloorAtNextSweep(t *testing.T) {
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}}, poller.Config{})
	e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
	tm := poller.NewTimings(poller.TimingsConfig{Records: e.store})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sweeps []poller.Stats
	var late int64
	err := e.poll.Run(ctx, poller.RunConfig{
		CallShare: 0.25, Throttle: e.client.Throttle, Timings: tm,
		OnSweep: func(st poller.Stats, err error) {
			if err != nil {
				t.Errorf("sweep: %v", err)
			}
			sweeps = append(sweeps, st)
			switch len(sweeps) {
			case 10:
				// A commit stamped 8 s below the watermark becomes visible only now.
				late = e.sim.AddOrder(plentysim.Order{CreatedAt: e.clk.Now().Add(-time.Hour), UpdatedAt: st.Watermark.Add(-8 * time.Second)}).ID
			case 11:
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sweeps) != 11 {
		t.Fatalf("%d sweeps; want 11", len(sweeps))
	}
	next := sweeps[10]
	if next.Timings.OverlapSource != poller.SourceLate || next.Timings.BeyondOverlap != 0 || len(next.LateArrivals) != 1 || next.Probe {
		t.Fatalf("the sweep after the late commit: late arrivals %v, probe %v, timings %+v; want it found by the sweep itself (one late arrival, none beyond the overlap)", next.LateArrivals, next.Probe, next.Timings)
	}
	found := false
	for _, ev := range e.events() {
		found = found || ev.Data.OrderID == late
	}
	if !found {
		t.Errorf("no event for the order %d that became visible 8 s late, after the next sweep", late)
	}
}
