package mirror_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/mirror"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/state"
)

const key = "shop_example.ORDERS"

// replica is one member of a group in the test: its state file, its
// connection, lease and mirror.
type replica struct {
	store *state.Store
	nc    *nats.Conn
	js    jetstream.JetStream
	lease *lease.Lease
	m     *mirror.Mirror
	stop  context.CancelFunc
	done  chan struct{}
}

func runServer(t *testing.T) testnats.Server {
	t.Helper()
	s := testnats.StartAny(t)
	nc, _ := nats.Connect(s.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	return s
}

func newReplica(t *testing.T, s testnats.Server, name string) *replica {
	t.Helper()
	return newReplicaWith(t, s, name, nil)
}

// newReplicaWith is newReplica with the mirror's store wrapped by wrap
// (nil: none).
func newReplicaWith(t *testing.T, s testnats.Server, name string, wrap func(mirror.Store) mirror.Store) *replica {
	t.Helper()
	st, err := state.Open(filepath.Join(t.TempDir(), name+".db"), state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	ckv, err := lease.CheckpointBucket(ctx, js, "t_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	dumps, err := mirror.DumpBucket(ctx, js, "t_snapshot")
	if err != nil {
		t.Fatal(err)
	}
	var ms mirror.Store = st
	if wrap != nil {
		ms = wrap(st)
	}
	m, err := mirror.New(mirror.Config{JS: js, Stream: "ORDERS", SubjectPrefix: "orders", Store: ms,
		Checkpoints: lease.NewCheckpoints(ckv, key), Dumps: dumps, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{store: st, nc: nc, js: js, m: m}
	runLease(t, r, name)
	return r
}

// runLease gives r a lease of the group's, run until the test ends or
// r.stop.
func runLease(t *testing.T, r *replica, name string) {
	t.Helper()
	ctx := context.Background()
	kv, ttl, err := lease.Bucket(ctx, r.js, "t_lease", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r.done = make(chan struct{})
	r.lease = lease.New(kv, ttl, lease.Config{Key: key, Instance: name, Host: "h", File: r.m.File()})
	lctx, cancel := context.WithCancel(ctx)
	r.stop = cancel
	go func() { defer close(r.done); _ = r.lease.Run(lctx) }()
	t.Cleanup(func() { cancel(); <-r.done })
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	testnats.WaitFor(t, what, limit, cond)
}

func orderState(status string, at time.Time) diff.State {
	return diff.State{StatusID: order.MustDecimal(status), LockStatus: "unlocked", TypeID: 1, PlentyID: 1,
		CreatedAt: order.Time{Time: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}, UpdatedAt: order.Time{Time: at}}
}

// change commits a status change of order id with its event; published
// says whether the event also reached the stream (and left the outbox).
func change(t *testing.T, r *replica, id int64, before, after diff.State, published bool) {
	t.Helper()
	ev := diff.Event{Type: diff.StatusChanged, OrderID: id, Before: &before, After: after, Order: []byte(fmt.Sprintf(`{"id":%d}`, id))}
	ev.ID = fmt.Sprintf("ev-%d-%d", id, after.UpdatedAt.Unix())
	subject := fmt.Sprintf("orders.status_changed.%s.%s.%d", before.StatusID.SubjectToken(), after.StatusID.SubjectToken(), id)
	wm := after.UpdatedAt.Time
	if err := r.store.Commit(state.Commit{States: []state.Put{{ID: id, State: after}},
		Events: []state.OutboxEntry{{ID: ev.ID, Subject: subject, Payload: diff.Encode(nil, ev, "src")}}, Watermark: &wm}); err != nil {
		t.Fatal(err)
	}
	if !published {
		return
	}
	entries, _ := r.store.Outbox(0, 0)
	for _, e := range entries {
		msg := &nats.Msg{Subject: e.Subject, Data: e.Payload, Header: nats.Header{"Nats-Msg-Id": []string{e.ID}}}
		if _, err := r.js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		if err := r.store.DeleteOutbox(e.Seq); err != nil {
			t.Fatal(err)
		}
	}
}

// threeEvents has the active a publish three events from t0's states:
// order 7 moves twice, order 8 once. It returns their last states.
func threeEvents(t *testing.T, a *replica) (s7, s8 diff.State) {
	t.Helper()
	s7a, s7b, s8 := orderState("6", t0.Add(time.Minute)), orderState("7", t0.Add(2*time.Minute)), orderState("6", t0.Add(2*time.Minute))
	change(t, a, 7, orderState("5", t0), s7a, true)
	change(t, a, 7, s7a, s7b, true)
	change(t, a, 8, orderState("5", t0), s8, true)
	return s7b, s8
}

func lookup(t *testing.T, s *state.Store, id int64) *diff.State {
	t.Helper()
	out := make([]*diff.State, 1)
	if err := s.Lookup([]int64{id}, out); err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// The life of a group: the active's first sync reaches the standby as a
// dump, its events through the stream, its bookkeeping as checkpoints;
// the active dies with an event unpublished; its successor takes over
// with the active's view, and the old one, back as a standby, undoes the
// unpublished event.
func TestStandbyFollowsAndTakesOver(t *testing.T) {
	s := runServer(t)
	ctx := context.Background()
	a := newReplica(t, s, "a")
	waitFor(t, "a active", 5*time.Second, a.lease.Active)
	b := newReplica(t, s, "b")
	if err := b.m.Demoted(ctx); err != nil { // b starts as a standby
		t.Fatal(err)
	}
	if restored, err := a.m.Takeover(ctx, a.lease, true); err != nil || restored {
		t.Fatalf("a's takeover at start: restored %v, %v; want a continuing replica", restored, err)
	}

	// a's first sync: 50 orders, silently, then a checkpoint and a dump.
	firstSync(t, a)

	bstop := runStandby(t, b)

	// Then events: order 7 moves twice, order 8 once.
	s7b, s8 := threeEvents(t, a)
	if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok {
		t.Fatalf("Committed: %v %v", ok, err)
	}
	waitFor(t, "b to mirror the events and the checkpoint", 10*time.Second, func() bool {
		st7, st8, st1 := lookup(t, b.store, 7), lookup(t, b.store, 8), lookup(t, b.store, 1)
		m, _ := b.store.Meta()
		return st7 != nil && st7.Same(s7b) && st8 != nil && st8.Same(s8) && st1 != nil && m.Watermark.Equal(s8.UpdatedAt.Time) && m.BaselineDone
	})
	if !b.m.CaughtUp(5*time.Second) || b.m.Lag() != 0 {
		t.Errorf("b caught up %v, lag %d", b.m.CaughtUp(5*time.Second), b.m.Lag())
	}

	// a commits a change of order 9 and dies before publishing it.
	change(t, a, 9, orderState("5", t0), orderState("8", t0.Add(3*time.Minute)), false)
	a.nc.Close()
	a.stop()
	<-a.done
	takesOver(t, b, bstop)
	m, _ := b.store.Meta()
	if !m.Watermark.Equal(s8.UpdatedAt.Time) || !m.BaselineDone || !m.Baseline.Equal(t0) {
		t.Errorf("b's bookkeeping after the takeover: %+v; want the checkpoint's", m)
	}
	if st := lookup(t, b.store, 9); st == nil || !st.Same(orderState("5", t0)) {
		t.Errorf("b's order 9 = %+v; want the published state (a's unpublished change is read again by b)", st)
	}
	if b.m.Epoch() != b.lease.Epoch() || b.m.Epoch() == 0 {
		t.Errorf("b's recorded tenure %d, lease epoch %d", b.m.Epoch(), b.lease.Epoch())
	}

	// a comes back on its file as a standby: its unpublished change is undone.
	a2 := reopen(t, s, a)
	if cont, err := a2.m.Continues(ctx); err != nil || cont {
		t.Errorf("a after b's tenure: continues %v (%v); want false", cont, err)
	}
	if err := a2.m.Demoted(ctx); err != nil {
		t.Fatal(err)
	}
	if st := lookup(t, a2.store, 9); st == nil || !st.Same(orderState("5", t0)) || a2.store.OutboxDepth() != 0 {
		t.Errorf("a's order 9 = %+v, outbox %d; want the change undone", st, a2.store.OutboxDepth())
	}
}

// runStandby runs b's mirror (Run) in the background until stop, which
// waits for it to end (called again: nothing more), or the test's end.
func runStandby(t *testing.T, b *replica) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.m.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// takesOver waits for the standby b to hold the lease, stops its mirror
// (stop, runStandby) and has it take over: the test fails unless b
// restored the group's state.
func takesOver(t *testing.T, b *replica, stop func()) {
	t.Helper()
	waitFor(t, "b to hold the lease", 10*time.Second, b.lease.Active)
	stop()
	restored, err := b.m.Takeover(context.Background(), b.lease, false)
	if err != nil || !restored {
		t.Fatalf("b's takeover: restored %v, %v", restored, err)
	}
}

// reopen opens r's state file again with a new connection (a restarted
// process); r's lease has ended.
func reopen(t *testing.T, s testnats.Server, r *replica) *replica {
	t.Helper()
	path := r.store.Path()
	if err := r.store.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(path, state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	nc, _ := nats.Connect(s.ClientURL())
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ckv, _ := lease.CheckpointBucket(context.Background(), js, "t_checkpoint")
	dumps, _ := mirror.DumpBucket(context.Background(), js, "t_snapshot")
	m, err := mirror.New(mirror.Config{JS: js, Stream: "ORDERS", SubjectPrefix: "orders", Store: st,
		Checkpoints: lease.NewCheckpoints(ckv, key), Dumps: dumps, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if m.File() != r.m.File() {
		t.Errorf("the state file's id changed across a restart: %s -> %s", r.m.File(), m.File())
	}
	return &replica{store: st, nc: nc, js: js, m: m}
}
