package mirror_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/mirror"
	"github.com/orderwatch/orderwatch/state"
)

// restoreHook is a state file that runs a function before a restore of a
// checkpoint: in a takeover at a process's start (Demoted), after the
// takeover's reads at its start and before its catch-up.
type restoreHook struct {
	mirror.Store
	before atomic.Pointer[func()]
}

func (s *restoreHook) RestoreWith(c state.Checkpoint, p state.Restore) error {
	if f := s.before.Swap(nil); f != nil {
		(*f)()
	}
	return s.Store.RestoreWith(c, p)
}

// TestStreamCreatedAgainDuringTheTakeover: the stream is deleted and
// created again after the takeover read the stream's info at its start
// and before its catch-up (the takeover goes on with the info it read:
// its first checkpoint may name the stream it read). The successor's next
// checkpoint names the stream as it is, and a standby that restores it
// reads the new stream's events.
func TestStreamCreatedAgainDuringTheTakeover(t *testing.T) {
	t.Parallel()
	streamCreatedAgainDuringTheTakeover(t, false)
}

// TestEventInStreamCreatedAgainDuringTheTakeover is a known race, not run
// by default (MIRROR_KNOWN_RACES=1 runs it; it fails): as above, with an
// event of the group published to the new stream before the catch-up (by
// a publisher other than the active: the old one is fenced by then). The
// catch-up, with the stream's info read at the takeover's start, misses
// it and does not call the snapshot unproven. Before the reads at the
// start (6b0ef2c) the same race was there during the dump's load, after
// the catch-up read the stream's info; closing it costs a read of the
// stream's info after the catch-up.
func TestEventInStreamCreatedAgainDuringTheTakeover(t *testing.T) {
	t.Parallel()
	if os.Getenv("MIRROR_KNOWN_RACES") == "" {
		t.Skip("a known race (MIRROR_KNOWN_RACES=1 runs it)")
	}
	streamCreatedAgainDuringTheTakeover(t, true)
}

func streamCreatedAgainDuringTheTakeover(t *testing.T, rogue bool) {
	s, a := group(t)
	ctx := context.Background()
	s7 := orderState("6", t0.Add(time.Minute))
	change(t, a, 7, orderState("5", t0), s7, true)
	change(t, a, 8, orderState("5", t0), orderState("6", t0.Add(time.Minute)), true)
	if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok {
		t.Fatalf("Committed: %v %v", ok, err)
	}
	hook := &restoreHook{}
	b := newReplicaWith(t, s, "b", func(st mirror.Store) mirror.Store { hook.Store = st; return hook })
	if err := b.m.Demoted(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.m.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	die(a)
	waitFor(t, "b to hold the lease", 10*time.Second, b.lease.Active)

	js := operator(t, s)
	var created time.Time
	recreate := func() {
		if err := js.DeleteStream(ctx, "ORDERS"); err != nil {
			t.Error(err)
			return
		}
		str, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute})
		if err != nil {
			t.Error(err)
			return
		}
		created = str.CachedInfo().Created
		if rogue {
			if _, err := js.PublishMsg(ctx, event("orders", 7, "9", t0.Add(90*time.Second))); err != nil {
				t.Error(err)
			}
		}
	}
	hook.before.Store(&recreate)
	if restored, err := b.m.Takeover(ctx, b.lease, true); err != nil || !restored {
		t.Fatalf("b's takeover: restored %v, %v", restored, err)
	}
	if created.IsZero() {
		t.Fatal("the stream was not created again inside the takeover: the test did not test")
	}
	if st := lookup(t, b.store, 7); rogue && (st == nil || st.StatusID.String() != "9") && b.m.Unproven() == "" {
		t.Errorf("b's order 7 = %+v and its snapshot proven; want the new stream's event applied, or the snapshot unproven", st)
	}
	s7b := orderState("7", t0.Add(2*time.Minute))
	if rogue {
		return
	}
	change(t, b, 7, s7, s7b, true) // sequence 1 of the new stream
	if ok, err := b.m.Committed(ctx, b.lease); err != nil || !ok {
		t.Fatalf("b's checkpoint: %v %v", ok, err)
	}
	ckv, err := js.KeyValue(ctx, "t_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	cp, found, err := lease.NewCheckpoints(ckv, key).Read(ctx)
	if err != nil || !found || !cp.Stream.Equal(created) || cp.Seq != 1 {
		t.Errorf("b's checkpoint after its first: stream created at %v, sequence %d (%v %v); want the new stream's (created at %v), 1", cp.Stream, cp.Seq, found, err, created)
	}

	c := newReplica(t, s, "c")
	if err := c.m.Demoted(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.m.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if st := lookup(t, c.store, 7); st == nil || !st.Same(s7b) {
		t.Errorf("the standby c's order 7 = %+v; want b's change %+v, in the new stream", st, s7b)
	}
}

// failingStore is a state file whose checkpoints fail once armed: a
// process killed between the takeover's first write of the record (the
// tenure with the checkpoint count) and its first checkpoint.
type failingStore struct {
	mirror.Store
	fail atomic.Bool
}

func (s *failingStore) Checkpoint() (state.Checkpoint, bool, error) {
	if s.fail.Load() {
		return state.Checkpoint{}, false, errors.New("killed before the checkpoint")
	}
	return s.Store.Checkpoint()
}

// TestTakeoverCutShortDoesNotContinue: a takeover cut short after the
// reads at its start, NATS gone (its catch-up cannot read), or before its
// first checkpoint (the tenure is recorded in the record's write that
// goes with it), fails; the file restarted afterwards does not continue a
// tenure the group never saw, and its next takeover restores the group's
// state.
func TestTakeoverCutShortDoesNotContinue(t *testing.T) {
	t.Parallel()
	for _, cut := range []string{"NATS gone after the reads at the start", "killed before the first checkpoint"} {
		t.Run(cut, func(t *testing.T) {
			t.Parallel()
			s, a := group(t)
			ctx := context.Background()
			s7 := orderState("6", t0.Add(time.Minute))
			change(t, a, 7, orderState("5", t0), s7, true)
			if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok {
				t.Fatalf("Committed: %v %v", ok, err)
			}
			s8 := orderState("6", t0.Add(2*time.Minute))
			change(t, a, 8, orderState("5", t0), s8, true) // after the checkpoint
			hook := &restoreHook{}
			fs := &failingStore{}
			b := newReplicaWith(t, s, "b", func(st mirror.Store) mirror.Store { fs.Store = st; hook.Store = fs; return hook })
			die(a)
			waitFor(t, "b to hold the lease", 10*time.Second, b.lease.Active)
			cutShort := func() { b.nc.Close() }
			if cut != "NATS gone after the reads at the start" {
				cutShort = func() { fs.fail.Store(true) }
			}
			hook.before.Store(&cutShort)
			if _, err := b.m.Takeover(ctx, b.lease, true); err == nil {
				t.Fatal("b's takeover cut short succeeded")
			}
			b.stop()
			<-b.done

			b2 := reopen(t, s, b)
			if cont, err := b2.m.Continues(ctx); err != nil || cont {
				t.Fatalf("b restarted after its takeover was cut short: continues %v (%v); want false", cont, err)
			}
			runLease(t, b2, "b2")
			waitFor(t, "b2 to hold the lease", 10*time.Second, b2.lease.Active)
			if restored, err := b2.m.Takeover(ctx, b2.lease, true); err != nil || !restored {
				t.Fatalf("b2's takeover: restored %v, %v", restored, err)
			}
			for id, want := range map[int64]diff.State{7: s7, 8: s8, 1: orderState("5", t0)} {
				if got := lookup(t, b2.store, id); got == nil || !got.Same(want) {
					t.Errorf("b2's order %d = %+v; want %+v", id, got, want)
				}
			}
			if b2.m.Epoch() != b2.lease.Epoch() {
				t.Errorf("b2's recorded tenure %d, its lease's %d", b2.m.Epoch(), b2.lease.Epoch())
			}
		})
	}
}
