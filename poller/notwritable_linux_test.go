//go:build linux

package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/internal/diskfull"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// A sweep whose commit cannot be stored (the state file's disk is full)
// pauses with what it read: no call to the service while it waits, and the
// same commit is stored once there is room, so nothing is read twice or lost.
func TestSweepPausesWhileStateNotWritable(t *testing.T) {
	if !diskfull.InChild(t) {
		return
	}
	e := newEnv(t, plentysim.Config{}, poller.Config{})
	e.sim.Generate(100, t0.Add(-5*24*time.Hour), t0.Add(-time.Hour))
	e.sweep()
	changed := e.sim.Orders()[3]
	e.clk.Advance(time.Minute)
	if _, err := e.sim.SetStatus(changed.ID, "7.01"); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(10 * time.Second)

	lift := diskfull.Limit(t, diskfull.MetaPages)
	type result struct {
		st  poller.Stats
		err error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a failed wait below must not leave the sweep waiting
	go func() {
		st, err := e.poll.Sweep(ctx)
		done <- result{st, err}
	}()
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	wait("the commit to fail", func() bool { return e.store.WriteErr() != nil })
	calls, paused := e.sim.Stats().SearchCalls, e.clk.Now()
	// The fake clock moves with every wait of the sweep: let it wait a while.
	wait("the sweep to wait ten minutes", func() bool { return e.clk.Now().Sub(paused) > 10*time.Minute })
	if got := e.sim.Stats().SearchCalls - calls; got != 0 {
		t.Errorf("%d search calls while the state file was not writable; want 0", got)
	}
	select {
	case r := <-done:
		t.Fatalf("the sweep ended while the state file was not writable: %v", r.err)
	default:
	}
	lift()
	r := <-done
	if r.err != nil || r.st.StateWaits != 1 || e.store.WriteErr() != nil {
		t.Fatalf("sweep after the disk had room: %v, %d state waits, WriteErr %v", r.err, r.st.StateWaits, e.store.WriteErr())
	}
	evs := e.events()
	if len(evs) != 1 || evs[0].Type != string(diff.StatusChanged) || evs[0].Data.OrderID != changed.ID {
		t.Errorf("events after the pause: %+v; want the one status change", evs)
	}
	e.assertSnapshotMatches()
}
