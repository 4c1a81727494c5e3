package mirror_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/state"
)

// TestFirstSyncCheckpointNeedsItsDump: the checkpoint that says the first
// sync is done is written only after the dump of the snapshot that sync
// recorded (the baseline is in no event of the stream). When the dump
// fails, no such checkpoint becomes the group's: a replica taking over
// does its own first sync instead of restoring an empty snapshot as
// complete, which published every order as discovered (seen in fleet
// mode when a dump timed out under load).
func TestFirstSyncCheckpointNeedsItsDump(t *testing.T) {
	s := runServer(t)
	ctx := context.Background()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// A dump bucket too small for any dump: every dump fails.
	if _, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "t_snapshot", MaxBytes: 64}); err != nil {
		t.Fatal(err)
	}
	a := newReplica(t, s, "a")
	waitFor(t, "a active", 5*time.Second, a.lease.Active)
	if _, err := a.m.Takeover(ctx, a.lease, true); err != nil {
		t.Fatal(err)
	}
	ckv, err := js.KeyValue(ctx, "t_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	baselineDone := func() bool {
		cp, found, err := lease.NewCheckpoints(ckv, key).Read(ctx)
		if err != nil || !found {
			return false
		}
		return strings.Contains(string(cp.State), `"baselineDone":true`)
	}
	recordBaseline(t, a)
	if ok, err := a.m.Committed(ctx, a.lease); err == nil || ok {
		t.Errorf("Committed with a failing dump: %v, %v; want no checkpoint and the dump's error", ok, err)
	}
	if baselineDone() {
		t.Fatal("the group's checkpoint says the first sync is done, but no dump holds its snapshot")
	}
}

// TestCheckpointInsideFirstSyncCarriesItsSnapshot: the first sync
// commits its progress slice by slice (a watermark below the baseline),
// and a checkpoint written then (a graceful stop inside a long first
// sync, a verified sweep that did not reach the baseline) hands that
// watermark to a successor. The orders read below it are in no event of
// the stream (the first sync publishes none): the successor that
// continues from the watermark must find them in its snapshot (a dump
// written before that checkpoint), or their next change is published as
// discovered, their history lost.
func TestCheckpointInsideFirstSyncCarriesItsSnapshot(t *testing.T) {
	s := runServer(t)
	ctx := context.Background()
	a := newActive(t, s, "a")
	if err := a.store.SetBaseline(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok {
		t.Fatalf("the baseline's checkpoint: %v, %v", ok, err)
	}
	var puts []state.Put
	for id := int64(1); id <= 50; id++ {
		puts = append(puts, state.Put{ID: id, State: orderState("5", t0)})
	}
	if err := a.store.Commit(state.Commit{States: puts, Watermark: &t0}); err != nil { // a slice, not the baseline
		t.Fatal(err)
	}
	if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok {
		t.Fatalf("the checkpoint inside the first sync: %v, %v", ok, err)
	}
	die(a)

	b := newReplica(t, s, "b")
	waitFor(t, "b active", 10*time.Second, b.lease.Active)
	if _, err := b.m.Takeover(ctx, b.lease, true); err != nil {
		t.Fatal(err)
	}
	m, err := b.store.Meta()
	if err != nil {
		t.Fatal(err)
	}
	if m.Watermark.IsZero() {
		return // b reads the first sync again from its start: nothing to miss
	}
	missing := 0
	for id := int64(1); id <= 50; id++ {
		if lookup(t, b.store, id) == nil {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("b continues the first sync from a's watermark %v without %d of the 50 orders a read below it", m.Watermark, missing)
	}
}

// newActive is the replica name, active, its takeover done (at its start).
func newActive(t *testing.T, s testnats.Server, name string) *replica {
	t.Helper()
	r := newReplica(t, s, name)
	waitFor(t, name+" active", 5*time.Second, r.lease.Active)
	if _, err := r.m.Takeover(context.Background(), r.lease, true); err != nil {
		t.Fatal(err)
	}
	return r
}
