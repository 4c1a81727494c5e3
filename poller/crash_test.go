package poller_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/state"
)

// orderCount is the size of the crash test's shop.
const orderCount = 400

var crashCycles = flag.Int("crash-cycles", 8, "kill -9 cycles of TestCrashConsistency")

// sweepOnce is the work of the crash test's subprocess and of its reference
// run: one sweep into the state file at path.
func sweepOnce(t testing.TB, url, path string) error {
	store, err := state.Open(path, state.Options{Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer store.Close()
	client, err := plenty.New(plenty.Config{BaseURL: url, Username: "demo", Password: "demo", Tokens: store})
	if err != nil {
		return err
	}
	p, err := poller.New(client, store, poller.Config{
		StartFrom: time.Now().Add(-48 * time.Hour), Settle: time.Second, ItemsPerPage: 50, SlicePages: 2,
		EmitBaseline: true, Source: "crash-test",
	})
	if err != nil {
		return err
	}
	_, err = p.Sweep(context.Background())
	return err
}

// TestCrashHelper is the subprocess of TestCrashConsistency.
func TestCrashHelper(t *testing.T) {
	url, path := os.Getenv("ORDERWATCH_CRASH_URL"), os.Getenv("ORDERWATCH_CRASH_STATE")
	if url == "" {
		t.Skip("the subprocess of TestCrashConsistency")
	}
	if err := sweepOnce(t, url, path); err != nil {
		t.Fatal(err)
	}
}

// TestCrashConsistency kills a sweeping process with SIGKILL at random
// moments, restarts it, and checks that the outbox and the snapshot end
// exactly as after an uninterrupted sweep: no event lost, none doubled.
func TestCrashConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 cycles take a few seconds")
	}
	sim := plentysim.New(plentysim.Config{MaxSessions: 1000, MaxItemsPerPage: 50, Seed: 11,
		Limits: plentysim.Limits{ShortLimit: 1 << 30, LongLimit: 1 << 30}}) // the throttle is not under test here
	now := time.Now()
	sim.Generate(orderCount, now.Add(-24*time.Hour), now.Add(-time.Minute))
	srv := httptest.NewServer(sim)
	defer srv.Close()
	dir := t.TempDir()

	ref := filepath.Join(dir, "reference.db")
	began := time.Now()
	if err := sweepOnce(t, srv.URL, ref); err != nil {
		t.Fatal(err)
	}
	// Kill moments spread over a whole run: start-up plus the sweep.
	span := 2*time.Since(began) + 100*time.Millisecond
	want, wantSnap := contents(t, ref)
	if len(want) != orderCount || len(wantSnap) != orderCount {
		t.Fatalf("reference: %d events, %d orders; want %d each", len(want), len(wantSnap), orderCount)
	}

	// Series of runs from an empty state file, each killed at random moments
	// until one run completes; every series must end as the reference.
	rng := rand.New(rand.NewPCG(uint64(began.UnixNano()), 1))
	kills := 0
	for series := 0; kills < *crashCycles; series++ {
		crashed := filepath.Join(dir, fmt.Sprintf("crashed-%d.db", series))
		// Up to five kills per series, then a run is let finish: a slow
		// machine (the race detector, a busy CI) cannot starve the series.
		for run := 0; ; run++ {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$")
			cmd.Env = append(os.Environ(), "ORDERWATCH_CRASH_URL="+srv.URL, "ORDERWATCH_CRASH_STATE="+crashed)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var killAt <-chan time.Time
			if run < 5 && kills < *crashCycles {
				killAt = time.After(time.Duration(rng.Int64N(int64(span))))
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("series %d run %d failed: %v", series, run, err)
				}
			case <-killAt:
				_ = cmd.Process.Kill()
				if err := <-done; err != nil {
					kills++
					continue
				}
				// finished before the signal landed
			}
			break
		}
		got, gotSnap := contents(t, crashed)
		if !slices.Equal(got, want) {
			t.Errorf("series %d: outbox after crashes holds %d events, reference %d, or they differ", series, len(got), len(want))
		}
		if len(gotSnap) != len(wantSnap) {
			t.Errorf("series %d: snapshot %d orders, reference %d", series, len(gotSnap), len(wantSnap))
		}
		for id, s := range wantSnap {
			if g, ok := gotSnap[id]; !ok || !g.Same(s) {
				t.Errorf("series %d: order %d differs from the reference", series, id)
			}
		}
	}
	t.Logf("%d kill -9 cycles, runs killed within %v", kills, span)
}

// contents returns the sorted event ids of the outbox (duplicates kept) and
// the snapshot of ids 1000 and up.
func contents(t *testing.T, path string) ([]string, map[int64]diff.State) {
	t.Helper()
	s, err := state.Open(path, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	entries, err := s.Outbox(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	slices.Sort(ids)
	lookup := make([]int64, orderCount)
	for i := range lookup {
		lookup[i] = int64(1000 + i)
	}
	states := make([]*diff.State, len(lookup))
	if err := s.Lookup(lookup, states); err != nil {
		t.Fatal(err)
	}
	snap := map[int64]diff.State{}
	for i, st := range states {
		if st != nil {
			snap[lookup[i]] = *st
		}
	}
	return ids, snap
}
