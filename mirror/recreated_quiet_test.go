package mirror_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
)

// TestTakeoverBeforeTheDumpOfAQuietStreamCreatedAgain: an operator deletes
// the stream and creates it again, and no event follows. The active a
// writes no checkpoint (and so no dump) for CheckpointEvery after a sweep
// without events; a dies inside that window, while its caught-up standby
// b still calls its snapshot unproven. b takes over from a's last
// checkpoint (of the earlier stream): its snapshot holds every order as
// a's did (a re-read of the overlap publishes nothing, and nothing is
// missed), it mirrors the new stream from its start, its first
// checkpoint names the new stream, and it stays unproven until the
// tenure's first dump, which covers the new stream: an unproven snapshot
// is never called proven without one.
func TestTakeoverBeforeTheDumpOfAQuietStreamCreatedAgain(t *testing.T) {
	s, a, b := groupWithStandby(t)
	ctx := context.Background()
	_, s8 := threeEvents(t, a)
	if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok {
		t.Fatalf("a's checkpoint: %v %v", ok, err)
	}
	bstop := runStandby(t, b)
	waitFor(t, "b to mirror a's events", 10*time.Second, func() bool {
		st := lookup(t, b.store, 8)
		return st != nil && st.Same(s8) && b.m.Seq() == 3
	})

	js := operator(t, s)
	if err := js.DeleteStream(ctx, "ORDERS"); err != nil {
		t.Fatal(err)
	}
	str, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	created := str.CachedInfo().Created
	// b learns of the new stream by itself (its look, once a second), not
	// from a's next checkpoint, which does not come.
	waitFor(t, "b to notice the new stream", 10*time.Second, func() bool { return b.m.Unproven() != "" })

	die(a)
	takesOver(t, b, bstop)
	if m, _ := b.store.Meta(); !m.Watermark.Equal(s8.UpdatedAt.Time) || !m.BaselineDone {
		t.Errorf("b's bookkeeping after the takeover: %+v; want a's checkpoint's (watermark %v)", m, s8.UpdatedAt.Time)
	}
	for id := int64(1); id <= 50; id++ {
		got, want := lookup(t, b.store, id), lookup(t, a.store, id)
		if got == nil || want == nil || !got.Same(*want) {
			t.Errorf("order %d: b took over with %+v, a had %+v", id, got, want)
		}
	}
	if b.m.Seq() != 0 {
		t.Errorf("b's position %d after the takeover; want 0 of the new stream (a's checkpoint counts in the earlier one)", b.m.Seq())
	}
	ckv, err := lease.CheckpointBucket(ctx, b.js, "t_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	cp, found, err := lease.NewCheckpoints(ckv, key).Read(ctx)
	if err != nil || !found || cp.Writer() != b.lease.Writer() || !cp.Stream.Equal(created) || cp.Seq != 0 {
		t.Errorf("the tenure's first checkpoint: %+v found %v (%v); want b's at sequence 0 of the stream created at %v", cp, found, err, created)
	}
	if b.m.Unproven() == "" {
		t.Error("b calls its snapshot proven after the takeover, before any dump of the new stream")
	}

	// b's first sweep: the tenure's first dump, of the new stream, proves it.
	if ok, err := b.m.Committed(ctx, b.lease); err != nil || !ok {
		t.Fatalf("b's first checkpoint: %v %v", ok, err)
	}
	if why := b.m.Unproven(); why != "" {
		t.Errorf("b after its own dump of the new stream: unproven %q", why)
	}
	obs, err := b.js.ObjectStore(ctx, "t_snapshot")
	if err != nil {
		t.Fatal(err)
	}
	info, err := obs.GetInfo(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if in, _ := time.Parse(time.RFC3339Nano, info.Metadata["stream"]); !in.Equal(created) || info.Metadata["instance"] != "b" {
		t.Errorf("the group's dump: %v; want b's of the stream created at %v", info.Metadata, created)
	}
	if n, _ := strconv.Atoi(info.Metadata["orders"]); n != 50 {
		t.Errorf("b's dump holds %d orders, want 50", n)
	}
}
