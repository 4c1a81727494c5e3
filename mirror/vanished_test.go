package mirror_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/state"
)

var t0 = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

// operator is a connection of the test's own, for what an operator does
// to the server with the nats CLI.
func operator(t *testing.T, s testnats.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	return js
}

// group starts a server and the group's first active replica, a
// (firstActive).
func group(t *testing.T) (testnats.Server, *replica) {
	t.Helper()
	s := runServer(t)
	a := newReplica(t, s, "a")
	firstActive(t, a)
	return s, a
}

// firstActive makes r the group's first active replica with a first sync
// of orders 1 to 50 (status 5 at t0), a checkpoint and a dump.
func firstActive(t *testing.T, r *replica) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, r.m.File()+" active", 5*time.Second, r.lease.Active)
	if _, err := r.m.Takeover(ctx, r.lease, true); err != nil {
		t.Fatal(err)
	}
	firstSync(t, r)
}

// firstSync commits the active r's first sync, orders 1 to 50 with status
// 5 at t0, silently, then a checkpoint and a dump.
func firstSync(t *testing.T, r *replica) {
	t.Helper()
	recordBaseline(t, r)
	if ok, err := r.m.Committed(context.Background(), r.lease); err != nil || !ok {
		t.Fatalf("Committed: %v %v", ok, err)
	}
}

// recordBaseline commits a first sync's 50 orders, silently.
func recordBaseline(t *testing.T, r *replica) {
	t.Helper()
	var puts []state.Put
	for id := int64(1); id <= 50; id++ {
		puts = append(puts, state.Put{ID: id, State: orderState("5", t0)})
	}
	if err := r.store.SetBaseline(t0); err != nil {
		t.Fatal(err)
	}
	if err := r.store.Commit(state.Commit{States: puts, Watermark: &t0, BaselineDone: true}); err != nil {
		t.Fatal(err)
	}
}

// die ends r's process without a release (kill -9).
func die(r *replica) {
	r.nc.Close()
	r.stop()
	<-r.done
}

// A lease bucket created again restarts its revisions at 1: the replica
// that held revision 1 of the old bucket and comes back after another
// held revision 1 of the new one must not take the other's checkpoint
// for its own.
func TestContinuesOnlyAfterItsOwnTenure(t *testing.T) {
	s, a := group(t)
	ctx := context.Background()
	epochA := a.lease.Epoch()
	die(a)
	if err := operator(t, s).DeleteKeyValue(ctx, "t_lease"); err != nil {
		t.Fatal(err)
	}
	b := newReplica(t, s, "b")
	waitFor(t, "b active", 5*time.Second, b.lease.Active)
	if b.lease.Epoch() != epochA {
		t.Fatalf("precondition: b's tenure began at revision %d, a's at %d; want the same revision", b.lease.Epoch(), epochA)
	}
	if err := b.m.Demoted(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.m.Takeover(ctx, b.lease, false); err != nil {
		t.Fatal(err)
	}
	s7 := orderState("6", t0.Add(time.Minute))
	change(t, b, 7, orderState("5", t0), s7, true)
	if ok, err := b.m.Committed(ctx, b.lease); err != nil || !ok {
		t.Fatalf("b's checkpoint: %v %v", ok, err)
	}
	die(b)

	a2 := reopen(t, s, a)
	if cont, err := a2.m.Continues(ctx); err != nil || cont {
		t.Fatalf("a after b's tenure of the same revision: continues %v (%v); want false", cont, err)
	}
	if err := a2.m.Demoted(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a2.m.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if st := lookup(t, a2.store, 7); st == nil || !st.Same(s7) {
		t.Errorf("a's order 7 = %+v; want b's change", st)
	}
}

// The group's checkpoint vanishes or turns to garbage after a standby read
// it: the standby still takes over, and its first checkpoint is readable.
func TestTakeoverPastAVanishedCheckpoint(t *testing.T) {
	for _, c := range []struct {
		name string
		do   func(ckv jetstream.KeyValue) error
	}{
		{"deleted", func(ckv jetstream.KeyValue) error { return ckv.Delete(context.Background(), key) }},
		{"purged", func(ckv jetstream.KeyValue) error { return ckv.Purge(context.Background(), key) }},
		{"corrupt", func(ckv jetstream.KeyValue) error {
			_, err := ckv.Put(context.Background(), key, []byte(`{"epoch":1,"state":"not a state"}`))
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, a := group(t)
			ctx := context.Background()
			b := newReplica(t, s, "b")
			if err := b.m.Demoted(ctx); err != nil { // reads the checkpoint
				t.Fatal(err)
			}
			die(a)
			ckv, err := operator(t, s).KeyValue(ctx, "t_checkpoint")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.do(ckv); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "b active", 10*time.Second, b.lease.Active)
			if _, err := b.m.Takeover(ctx, b.lease, false); err != nil {
				t.Fatalf("b's takeover: %v", err)
			}
			cp, found, err := lease.NewCheckpoints(ckv, key).Read(ctx)
			if err != nil || !found || cp.Writer() != b.lease.Writer() {
				t.Errorf("the checkpoint after b's takeover: %+v %v %v; want b's", cp, found, err)
			}
			// A restart of b continues from its own file.
			if cont, err := b.m.Continues(ctx); err != nil || !cont {
				t.Errorf("b continues %v (%v); want true", cont, err)
			}
		})
	}
}

// A replica demoted without a checkpoint of the group to rewind to undoes
// its unpublished change and moves its own watermark back before it: the
// next active reads that change again.
func TestDemotedWithoutCheckpointReadsUndoneChangesAgain(t *testing.T) {
	s, a := group(t)
	ctx := context.Background()
	changed := t0.Add(3 * time.Minute)
	change(t, a, 9, orderState("5", t0), orderState("8", changed), false)
	die(a)
	ckv, err := operator(t, s).KeyValue(ctx, "t_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if err := ckv.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	a2 := reopen(t, s, a)
	if err := a2.m.Demoted(ctx); err != nil {
		t.Fatal(err)
	}
	m, _ := a2.store.Meta()
	if st := lookup(t, a2.store, 9); st == nil || !st.Same(orderState("5", t0)) || !m.Watermark.Before(changed) {
		t.Errorf("after Demoted without a checkpoint: order 9 %+v, watermark %v; want the change undone and the watermark before %v", st, m.Watermark, changed)
	}
}

// The stream is deleted and created again (the active's publisher creates
// it): sequences restart at 1. The standby notices, reads the new stream
// from its start, and says its snapshot is unproven until the active's
// next dump.
func TestStreamCreatedAgain(t *testing.T) {
	s, a := group(t)
	ctx := context.Background()
	b := newReplica(t, s, "b")
	if err := b.m.Demoted(ctx); err != nil {
		t.Fatal(err)
	}
	bctx, bstop := context.WithCancel(ctx)
	bdone := make(chan struct{})
	go func() { defer close(bdone); _ = b.m.Run(bctx) }()
	defer func() { bstop(); <-bdone }()

	s7b, s8 := threeEvents(t, a)
	waitFor(t, "b to mirror the events", 10*time.Second, func() bool {
		st := lookup(t, b.store, 8)
		return st != nil && st.Same(s8) && b.m.Seq() == 3
	})
	if b.m.Unproven() != "" {
		t.Errorf("unproven before the stream was created again: %s", b.m.Unproven())
	}

	js := operator(t, s)
	if err := js.DeleteStream(ctx, "ORDERS"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	s7c := orderState("8", t0.Add(4*time.Minute))
	change(t, a, 7, s7b, s7c, true) // sequence 1 of the new stream
	waitFor(t, "b to mirror the new stream's first event", 10*time.Second, func() bool {
		st := lookup(t, b.store, 7)
		return st != nil && st.Same(s7c)
	})
	if b.m.Unproven() == "" {
		t.Error("b's snapshot proven right after the stream was created again; want unproven until the active's dump")
	}
	// The active's next checkpoint notices the new stream and dumps.
	if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok {
		t.Fatalf("Committed: %v %v", ok, err)
	}
	waitFor(t, "b to load the dump of the new stream", 10*time.Second, func() bool { return b.m.Unproven() == "" })
	if st := lookup(t, b.store, 8); st == nil || !st.Same(s8) {
		t.Errorf("b's order 8 = %+v after the dump; want %+v", st, s8)
	}
}

// The checkpoint bucket is deleted and created again: its revisions start
// at 1 again, and the standby still applies the new checkpoint at the
// revision it applied last in the old bucket.
func TestStandbyAppliesCheckpointOfBucketCreatedAgain(t *testing.T) {
	s, a := group(t)
	ctx := context.Background()
	b := newReplica(t, s, "b")
	if ok, err := b.m.ApplyCheckpoint(ctx, false); err != nil || !ok {
		t.Fatalf("b applies a's first checkpoint: %v %v", ok, err)
	}
	if err := operator(t, s).DeleteKeyValue(ctx, "t_checkpoint"); err != nil {
		t.Fatal(err)
	}
	s7 := orderState("6", t0.Add(time.Minute))
	change(t, a, 7, orderState("5", t0), s7, true)
	if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok {
		t.Fatalf("a's checkpoint after the bucket was deleted: %v %v", ok, err)
	}
	if ok, err := b.m.ApplyCheckpoint(ctx, false); err != nil || !ok {
		t.Errorf("b applies the checkpoint of the bucket created again: %v %v; want applied", ok, err)
	}
	if m, _ := b.store.Meta(); !m.Watermark.Equal(s7.UpdatedAt.Time) {
		t.Errorf("b's watermark %v, want a's %v", m.Watermark, s7.UpdatedAt.Time)
	}
}

// The stream's limits remove events before the standby read them: its
// snapshot is unproven until it loads a dump that covers the stream.
func TestEventsRemovedBeforeReadLeaveTheSnapshotUnproven(t *testing.T) {
	s, a, b := groupWithStandby(t)
	ctx := context.Background()
	js := operator(t, s)
	if _, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute, MaxMsgs: 2}); err != nil {
		t.Fatal(err)
	}
	prev := orderState("5", t0)
	for i := range 4 {
		next := orderState("6", t0.Add(time.Duration(i+1)*time.Minute))
		change(t, a, 7, prev, next, true)
		prev = next
	}
	if err := b.m.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if b.m.Unproven() == "" {
		t.Fatal("b read a stream that had lost events 1 and 2 and calls its snapshot proven")
	}
	dumpProvesAgain(t, a, b, prev)
}

// groupWithStandby is a group (firstActive a) and its standby b, caught
// up with a's first dump.
func groupWithStandby(t *testing.T) (testnats.Server, *replica, *replica) {
	t.Helper()
	s, a := group(t)
	ctx := context.Background()
	b := newReplica(t, s, "b")
	if err := b.m.Demoted(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.m.CatchUp(ctx); err != nil { // loads a's dump
		t.Fatal(err)
	}
	return s, a, b
}

// dumpProvesAgain has a, the active, write a dump that covers the stream
// (a new tenure's first), and checks that the standby b, once it loaded
// it, is proven again with order 7 in the state prev.
func dumpProvesAgain(t *testing.T, a, b *replica, prev diff.State) {
	t.Helper()
	ctx := context.Background()
	if err := a.m.Activated(a.lease.Writer()); err != nil { // a new tenure's first Committed dumps
		t.Fatal(err)
	}
	if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok {
		t.Fatalf("Committed: %v %v", ok, err)
	}
	if err := b.m.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if why := b.m.Unproven(); why != "" {
		t.Errorf("b after loading a dump that covers the stream: unproven %q", why)
	}
	if st := lookup(t, b.store, 7); st == nil || !st.Same(prev) {
		t.Errorf("b's order 7 = %+v, want %+v", st, prev)
	}
}
