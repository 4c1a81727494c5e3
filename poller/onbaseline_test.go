package poller_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// OnBaseline tells the group the first sync's baseline before the sync
// records anything: a failure ends the sweep before it reads, the next
// sweep tells it again; once told, and once the baseline is done, it is
// not called again.
func TestOnBaselineBeforeTheFirstSyncReads(t *testing.T) {
	var calls []time.Time
	var recorded []int
	fail := true
	var e *env
	e = newEnv(t, plentysim.Config{MaxItemsPerPage: 50}, poller.Config{ItemsPerPage: 50, SlicePages: 2,
		OnBaseline: func(_ context.Context, b time.Time) error {
			calls = append(calls, b)
			recorded = append(recorded, known(e))
			if fail {
				return errors.New("no checkpoint")
			}
			return nil
		}})
	e.sim.Generate(300, t0.Add(-20*24*time.Hour), t0.Add(-time.Minute))
	if _, err := e.poll.Sweep(context.Background()); err == nil {
		t.Fatal("the sweep went on although the group was not told the baseline")
	}
	meta, _ := e.store.Meta()
	if n := known(e); n != 0 || !meta.Watermark.IsZero() {
		t.Fatalf("the sweep recorded %d orders (watermark %v) before the group knew the baseline", n, meta.Watermark)
	}
	fail = false
	e.clk.Advance(time.Minute)
	e.sweep()
	e.clk.Advance(time.Minute)
	e.sweep()
	if len(calls) != 2 || !calls[0].Equal(meta.Baseline) || !calls[1].Equal(meta.Baseline) {
		t.Fatalf("OnBaseline calls %v, want twice with the baseline %v (the failed one, then once more)", calls, meta.Baseline)
	}
	if recorded[0] != 0 || recorded[1] != 0 {
		t.Errorf("orders recorded when the group was told: %v, want none", recorded)
	}
	if meta, _ := e.store.Meta(); !meta.BaselineDone {
		t.Errorf("first sync not done: %+v", meta)
	}
	// A new poller on the file whose first sync is done: not called.
	e.restartFailFast(e.cfg)
	e.clk.Advance(time.Minute)
	e.sweep()
	if len(calls) != 2 {
		t.Errorf("OnBaseline called after the first sync: %v", calls)
	}
}

// known counts the orders the snapshot holds.
func known(e *env) int {
	n := 0
	for _, s := range e.snapshot() {
		if s != nil {
			n++
		}
	}
	return n
}
