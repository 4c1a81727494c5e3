package replica_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/state"
)

// statusChange is a sweep's commit of one order's status change with its
// event (what the outbox holds until it is published).
func statusChange(id int64, at time.Time) state.Commit {
	st := func(status string, at time.Time) diff.State {
		return diff.State{StatusID: order.MustDecimal(status), LockStatus: "unlocked", TypeID: 1, PlentyID: 1,
			CreatedAt: order.Time{Time: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}, UpdatedAt: order.Time{Time: at}}
	}
	before, after := st("5", at.Add(-time.Hour)), st("6", at)
	ev := diff.Event{Type: diff.StatusChanged, OrderID: id, Before: &before, After: after, Order: []byte(fmt.Sprintf(`{"id":%d}`, id))}
	ev.ID = fmt.Sprintf("ev-%d-%d", id, at.Unix())
	return state.Commit{States: []state.Put{{ID: id, State: after}}, Watermark: &at,
		Events: []state.OutboxEntry{{ID: ev.ID, Subject: fmt.Sprintf("orders.status_changed.5.6.%d", id), Payload: diff.Encode(nil, ev, "src")}}}
}

// TestCommitAfterDemotionIsRefused: a sweep still running when the
// demotion stopped waiting for it (the shutdown timeout) tries to commit
// after the demotion undid the outbox: the commit is refused, and the
// state file holds nothing of it.
func TestCommitAfterDemotionIsRefused(t *testing.T) {
	g := newGroup(t)
	release, result := make(chan struct{}), make(chan error, 1)
	var a *member
	p := &pipeline{onStart: func(ctx context.Context, st *state.Store) {
		go func() { // the sweep the stop does not wait for
			<-ctx.Done()
			<-release
			result <- a.rep.Fence(func() error { return st.Commit(statusChange(7, time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC))) })
		}()
	}}
	a = g.activeWithCheckpoint(p, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	g.takenBy("x")
	waitFor(t, "a demoted and mirroring", a.demotedToStandby)
	close(release)
	if err := <-result; !errors.Is(err, replica.ErrFenced) {
		t.Errorf("the lingering sweep's commit after the demotion: %v, want ErrFenced", err)
	}
	if n := a.store.OutboxDepth(); n != 0 {
		t.Errorf("a's outbox holds %d entries after its demotion", n)
	}
	out := make([]*diff.State, 1)
	if err := a.store.Lookup([]int64{7}, out); err != nil || out[0] != nil {
		t.Errorf("order 7 in a's snapshot after its demotion: %+v (%v)", out[0], err)
	}
}

// TestTakeoverUndoesAnOutboxLeftAfterDemotion: a standby whose state file
// holds an outbox (a commit that came after its demotion, by a version
// without the fence) takes over: the outbox is undone before any call and
// the tenure's first checkpoint is written (without it the takeover fails).
func TestTakeoverUndoesAnOutboxLeftAfterDemotion(t *testing.T) {
	g := newGroup(t)
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring && b.rep.Status().Holder == "a" })
	if err := b.store.Commit(statusChange(7, time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC))); err != nil {
		t.Fatal(err)
	}
	a.kill()
	waitFor(t, "b active", b.working)
	if n := b.store.OutboxDepth(); n != 0 {
		t.Errorf("b took over with %d outbox entries of an earlier tenure", n)
	}
	if cp, ok := g.checkpoint(); !ok || cp.Instance != "b" {
		t.Errorf("b works without its tenure's first checkpoint: the group's is %+v", cp)
	}
}
