package poller_test

import (
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/state"
)

// dropStore drops the stored state of one order: the snapshot a standby
// builds from the mirrored stream, which never sees a change of updatedAt
// alone (no event).
type dropStore struct {
	*state.Store
	drop int64
}

func (s dropStore) Commit(c state.Commit) error {
	kept := make([]state.Put, 0, len(c.States))
	for _, p := range c.States {
		if p.ID != s.drop {
			kept = append(kept, p)
		}
	}
	c.States = kept
	return s.Store.Commit(c)
}

// TestTakeoverDoesNotCountUnseenChangesAsLate: the active publishes
// nothing for a change of updatedAt alone, so the standby's snapshot lacks
// it; after a takeover (a poller built on the restored state) the first
// sweep reads it in its overlap. That is no late arrival: no sweep of this
// process had verified that window. A change that does arrive late below a
// watermark this process verified is still measured.
func TestTakeoverDoesNotCountUnseenChangesAsLate(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{})
	e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
	e.sweep() // baseline
	e.clk.Advance(10 * time.Second)
	e.sweep()
	touched := e.sim.Orders()[3].ID
	if _, err := e.sim.Touch(touched); err != nil {
		t.Fatal(err)
	}
	// The active sweeps past the touch; the standby's copy of the
	// snapshot never gets it.
	active, err := poller.New(e.client, dropStore{Store: e.store, drop: touched}, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		e.clk.Advance(10 * time.Second)
		if _, err := active.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if m, _ := e.store.Meta(); !m.Watermark.After(e.sim.Orders()[3].UpdatedAt) {
		t.Fatalf("watermark %v not past the touch", m.Watermark)
	}

	// Takeover: a new poller on the restored state.
	e.poll, err = poller.New(e.client, e.store, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(3 * time.Second)
	if st := e.sweep(); len(st.LateArrivals) != 0 {
		t.Fatalf("first sweep after the takeover: late arrivals %v; want none (the change of updatedAt alone was never in the standby's snapshot)", st.LateArrivals)
	}
	// A real late arrival below the watermark this process verified.
	e.clk.Advance(3 * time.Second)
	m, _ := e.store.Meta()
	e.sim.AddOrder(plentysim.Order{CreatedAt: t0.Add(-2 * time.Hour), UpdatedAt: m.Watermark.Add(-4 * time.Second)})
	if st := e.sweep(); len(st.LateArrivals) != 1 {
		t.Fatalf("the sweep after a commit 4 s below the watermark: late arrivals %v; want one", st.LateArrivals)
	}
}
