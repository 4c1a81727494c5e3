package mirror_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
)

// TestKilledRightAfterACheckpoint: a checkpoint keeps the stream position
// it reached in memory (written with the record's next write), so the
// active killed (kill -9) right after a run of checkpoints restarts on a
// file whose position lags behind its last checkpoint; with the stream
// deleted and created again between two of them, the new stream's
// position is in the file at once. The restarted process still continues
// its own tenure; once another replica took over, it is demoted, reads
// the stream from where its file is, and holds the new active's states:
// no order moved back, no event missed, read up to the stream's end.
func TestKilledRightAfterACheckpoint(t *testing.T) {
	t.Parallel()
	for _, recreate := range []bool{false, true} {
		t.Run(map[bool]string{false: "same stream", true: "stream created again between checkpoints"}[recreate], func(t *testing.T) {
			t.Parallel()
			s, a := group(t)
			ctx := context.Background()
			s7, s8 := orderState("5", t0), orderState("5", t0)
			step := func(id int64, prev *diff.State, at time.Duration) {
				t.Helper()
				next := orderState([]string{"6", "7"}[int(at/time.Minute)%2], t0.Add(at))
				change(t, a, id, *prev, next, true)
				*prev = next
				if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok {
					t.Fatalf("Committed: %v %v", ok, err)
				}
			}
			step(7, &s7, time.Minute)
			step(8, &s8, 2*time.Minute)
			if recreate {
				js := operator(t, s)
				if err := js.DeleteStream(ctx, "ORDERS"); err != nil {
					t.Fatal(err)
				}
				if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute}); err != nil {
					t.Fatal(err)
				}
			}
			step(7, &s7, 3*time.Minute)
			step(8, &s8, 4*time.Minute)
			die(a)

			a2 := reopen(t, s, a)
			if cont, err := a2.m.Continues(ctx); err != nil || !cont {
				t.Fatalf("a restarted on its file right after its checkpoint: continues %v (%v); want true", cont, err)
			}
			last := lastSeq(t, a2)
			t.Logf("a's file restarts at sequence %d of the stream's %d", a2.m.Seq(), last)
			if seq := a2.m.Seq(); seq > last {
				t.Fatalf("a's file is at sequence %d, past the stream's last %d (of another stream)", seq, last)
			}

			// b takes over from a's checkpoint and moves order 7 on, and 9.
			b := newReplica(t, s, "b")
			waitFor(t, "b to hold the lease", 10*time.Second, b.lease.Active)
			if restored, err := b.m.Takeover(ctx, b.lease, true); err != nil || !restored {
				t.Fatalf("b's takeover: restored %v, %v", restored, err)
			}
			s7b, s9 := orderState("8", t0.Add(5*time.Minute)), orderState("6", t0.Add(5*time.Minute))
			change(t, b, 7, s7, s7b, true)
			change(t, b, 9, orderState("5", t0), s9, true)
			if ok, err := b.m.Committed(ctx, b.lease); err != nil || !ok {
				t.Fatalf("b's checkpoint: %v %v", ok, err)
			}

			if cont, err := a2.m.Continues(ctx); err != nil || cont {
				t.Fatalf("a after b's tenure: continues %v (%v); want false", cont, err)
			}
			if err := a2.m.Demoted(ctx); err != nil {
				t.Fatal(err)
			}
			if err := a2.m.CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
			for id, want := range map[int64]diff.State{7: s7b, 8: s8, 9: s9, 1: orderState("5", t0)} {
				if got := lookup(t, a2.store, id); got == nil || !got.Same(want) {
					t.Errorf("a, demoted: order %d = %+v; want %+v", id, got, want)
				}
			}
			if seq, last := a2.m.Seq(), lastSeq(t, a2); seq != last {
				t.Errorf("a, demoted, read up to %d; want the stream's last %d", seq, last)
			}
		})
	}
}

func lastSeq(t *testing.T, r *replica) uint64 {
	t.Helper()
	s, err := r.js.Stream(context.Background(), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.LastSeq
}
