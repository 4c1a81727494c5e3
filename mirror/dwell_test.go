package mirror_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/state"
)

// TestStandbyKnowsWhenOrdersEnteredTheirStatus: a standby's snapshot says
// when each order entered its status as the active's does: from the dump
// for what the active stored silently (its first sync, with times before
// the last update), from the events for what followed (a status change at
// its after.updatedAt, a lock change keeping the time), so both replicas
// report the same dwell.
func TestStandbyKnowsWhenOrdersEnteredTheirStatus(t *testing.T) {
	s := runServer(t)
	ctx := context.Background()
	a := newReplica(t, s, "a")
	waitFor(t, "a active", 5*time.Second, a.lease.Active)
	b := newReplica(t, s, "b")
	if err := b.m.Demoted(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.m.Takeover(ctx, a.lease, true); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	long := t0.Add(-48 * time.Hour)
	var puts []state.Put
	for id := int64(1); id <= 3; id++ {
		st := orderState("5", t0)
		st.StatusSince = order.Time{Time: long} // entered 5 two days before its last update
		puts = append(puts, state.Put{ID: id, State: st})
	}
	if err := a.store.SetBaseline(t0); err != nil {
		t.Fatal(err)
	}
	if err := a.store.Commit(state.Commit{States: puts, Watermark: &t0, BaselineDone: true}); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok {
		t.Fatalf("Committed: %v %v", ok, err)
	}
	bctx, bstop := context.WithCancel(ctx)
	bdone := make(chan struct{})
	go func() { defer close(bdone); _ = b.m.Run(bctx) }()
	defer func() { bstop(); <-bdone }()

	// Order 2 moves to 6; order 3 is locked (still in 5).
	t1 := t0.Add(time.Hour)
	moved := orderState("6", t1)
	locked := orderState("5", t1)
	locked.LockStatus = "permanentlyLocked"
	// As the active's sweep decides it (diff.Decide); change publishes
	// each as a status_changed event: the mirror reads only data.after.
	moved.StatusSince = diff.EnteredStatus(&puts[1].State, moved)
	locked.StatusSince = diff.EnteredStatus(&puts[2].State, locked)
	change(t, a, 2, puts[1].State, moved, true)
	change(t, a, 3, puts[2].State, locked, true)

	waitFor(t, "b to mirror both events", 10*time.Second, func() bool {
		st2, st3 := lookup(t, b.store, 2), lookup(t, b.store, 3)
		return st2 != nil && st2.Same(moved) && st3 != nil && st3.Same(locked)
	})
	for id, want := range map[int64]time.Time{1: long, 2: t1, 3: long} {
		ast, bst := lookup(t, a.store, id), lookup(t, b.store, id)
		if !ast.StatusSince.Equal(want) || !bst.StatusSince.Equal(want) {
			t.Errorf("order %d entered its status at %v on the active, %v on the standby; want %v", id, ast.StatusSince, bst.StatusSince, want)
		}
	}
	ad, err := a.store.Dwell()
	if err != nil {
		t.Fatal(err)
	}
	bd, err := b.store.Dwell()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ad, bd) || len(ad) != 2 {
		t.Errorf("dwell: active %+v, standby %+v", ad, bd)
	}
}
