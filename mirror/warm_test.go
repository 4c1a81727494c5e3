package mirror_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/mirror"
	"github.com/orderwatch/orderwatch/state"
)

// What a warm mirror would cost and gain (docs/fleet.md, "Warm mirrors"):
// measurements, run with MIRROR_WARM_MEASURE=1 (-v for the figures).
func measuring(t *testing.T) {
	t.Helper()
	if os.Getenv("MIRROR_WARM_MEASURE") == "" {
		t.Skip("MIRROR_WARM_MEASURE=1 measures")
	}
}

// orderJSON is an order's document of about 1 KiB, as a service returns
// it (the event carries it).
func orderJSON(id int64) []byte {
	return fmt.Appendf(nil, `{"id":%d,"typeId":1,"statusId":5,"plentyId":1,"note":%q}`, id, strings.Repeat("x", 950))
}

// event is order id's change to status `to` at `at` on the group's
// subjects (prefix), as the active's publisher sends it.
func event(prefix string, id int64, to string, at time.Time) *nats.Msg {
	before, after := orderState("5", t0), orderState(to, at)
	ev := diff.Event{Type: diff.StatusChanged, OrderID: id, Before: &before, After: after, Order: orderJSON(id)}
	ev.ID = fmt.Sprintf("ev-%s-%d-%d", prefix, id, at.UnixNano())
	return &nats.Msg{Subject: fmt.Sprintf("%s.status_changed.5.%s.%d", prefix, to, id), Data: diff.Encode(nil, ev, "src"),
		Header: nats.Header{"Nats-Msg-Id": []string{ev.ID}}}
}

// takeover times r's takeover (r holding the lease) and checks the state
// it restored: order 1's last change and the checkpoint's watermark.
func takeover(t *testing.T, name string, r *replica, atStart bool, order1 diff.State, wm time.Time) time.Duration {
	t.Helper()
	waitFor(t, name+" holding the lease", 30*time.Second, r.lease.Active)
	start := time.Now()
	restored, err := r.m.Takeover(context.Background(), r.lease, atStart)
	took := time.Since(start)
	if err != nil || !restored {
		t.Fatalf("%s: takeover restored %v, %v", name, restored, err)
	}
	if st := lookup(t, r.store, 1); st == nil || !st.Same(order1) {
		t.Errorf("%s: order 1 = %+v after the takeover; want %+v", name, st, order1)
	}
	if m, _ := r.store.Meta(); !m.Watermark.Equal(wm) {
		t.Errorf("%s: watermark %v; want the checkpoint's %v", name, m.Watermark, wm)
	}
	return took
}

// TestMeasureTakeoverRestore: a shop of 10,000 orders whose dump is 5
// minutes old at 20 changes a second (6,000 events since the dump): the
// restore of a takeover (mirror.Takeover) on a cold state file (what a
// fleet member does) and on a warm standby's file that followed the
// stream (what a warm mirror would save).
func TestMeasureTakeoverRestore(t *testing.T) {
	measuring(t)
	const orders, since = 10000, 6000
	s := runServer(t)
	ctx := context.Background()
	a := newActive(t, s, "a")
	puts := make([]state.Put, 0, orders)
	for id := int64(1); id <= orders; id++ {
		puts = append(puts, state.Put{ID: id, State: orderState("5", t0)})
	}
	if err := a.store.SetBaseline(t0); err != nil {
		t.Fatal(err)
	}
	if err := a.store.Commit(state.Commit{States: puts, Watermark: &t0, BaselineDone: true}); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok { // the dump and a checkpoint
		t.Fatalf("Committed: %v %v", ok, err)
	}
	warm := newReplica(t, s, "warm")
	wctx, wstop := context.WithCancel(ctx)
	wdone := make(chan struct{})
	go func() { defer close(wdone); _ = warm.m.Run(wctx) }()
	last := t0
	for i := range since {
		last = t0.Add(time.Duration(i+1) * time.Second) // whole seconds: what an event carries
		if _, err := a.js.PublishMsg(ctx, event("orders", int64(i%orders+1), "6", last)); err != nil {
			t.Fatal(err)
		}
	}
	wm := last
	if err := a.store.Commit(state.Commit{Watermark: &wm}); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.m.Committed(ctx, a.lease); err != nil || !ok { // a checkpoint, no dump (younger than 5 min)
		t.Fatalf("Committed: %v %v", ok, err)
	}
	waitFor(t, "the warm standby caught up", time.Minute, func() bool { return warm.m.Lag() == 0 && warm.m.CaughtUp(time.Second) })
	die(a)
	order1 := orderState("6", t0.Add(time.Second))

	// The warm standby takes the lease (the only one contending), stops
	// following and takes over; then it dies and a cold file takes over.
	waitFor(t, "the warm standby holding the lease", 30*time.Second, warm.lease.Active)
	wstop()
	<-wdone
	tw := takeover(t, "warm standby", warm, false, order1, wm)
	die(warm)
	cold := newReplica(t, s, "cold")
	tc := takeover(t, "cold file", cold, true, order1, wm)
	dumps, err := cold.js.ObjectStore(ctx, "t_snapshot")
	if err != nil {
		t.Fatal(err)
	}
	infos, err := dumps.List(ctx)
	if err != nil || len(infos) != 1 {
		t.Fatalf("dumps %v, %v; want one", infos, err)
	}
	t.Logf("takeover of a shop of %d orders, a dump (%d KiB) and %d events since: cold state file (a fleet member) %v, warm standby %v",
		orders, infos[0].Size>>10, since, tc.Round(time.Millisecond), tw.Round(time.Millisecond))
}

// standby is a warm mirror of one shop: its own state file and ordered
// consumer on the shop's subjects (orders.<shop>.>).
func standby(t *testing.T, js jetstream.JetStream, ckv jetstream.KeyValue, dumps jetstream.ObjectStore, shop string) *mirror.Mirror {
	t.Helper()
	st, err := state.Open(filepath.Join(t.TempDir(), shop+".db"), state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	k := shop + ".ORDERS"
	m, err := mirror.New(mirror.Config{JS: js, Stream: "ORDERS", SubjectPrefix: "orders." + shop, Store: st,
		Checkpoints: lease.NewCheckpoints(ckv, k), Dumps: dumps, Key: k})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type usage struct {
	cpu           time.Duration
	heap, rss     uint64
	inMsgs, outMs int64
	at            time.Time
}

func sample(ns *server.Server) usage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	v, _ := ns.Varz(nil)
	var rss uint64
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 1 {
			pages, _ := strconv.ParseUint(f[1], 10, 64)
			rss = pages * uint64(os.Getpagesize())
		}
	}
	return usage{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), heap: ms.HeapInuse, rss: rss, inMsgs: v.InMsgs, outMs: v.OutMsgs, at: time.Now()}
}

// TestMeasureWarmMirrorCost: the cost of warm mirrors of N shops
// (MIRROR_WARM_SHOPS, default 100) in one process, each following its
// shop's subjects into its bbolt file, while every shop changes an order
// every 5 s (MIRROR_WARM_EVERY): CPU, heap and NATS messages per second
// over 20 s without the mirrors, then with them.
func TestMeasureWarmMirrorCost(t *testing.T) {
	measuring(t)
	n, _ := strconv.Atoi(os.Getenv("MIRROR_WARM_SHOPS"))
	if n <= 0 {
		n = 100
	}
	every, err := time.ParseDuration(os.Getenv("MIRROR_WARM_EVERY"))
	if err != nil {
		every = 5 * time.Second
	}
	const window = 20 * time.Second
	s := runServer(t)
	ns, ok := s.(*server.Server)
	if !ok {
		t.Skip("measured on the server in process")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ckv, err := lease.CheckpointBucket(ctx, js, "t_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	dumps, err := mirror.DumpBucket(ctx, js, "t_snapshot")
	if err != nil {
		t.Fatal(err)
	}
	shops := make([]string, n)
	for i := range shops {
		shops[i] = fmt.Sprintf("s%04d", i)
	}
	// The shops' changes, spread over `every`.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		tick := time.NewTicker(every / time.Duration(n))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := js.PublishMsg(ctx, event("orders."+shops[i%n], int64(i/n%50+1), "6", t0.Add(time.Duration(i)*time.Second))); err != nil && ctx.Err() == nil {
				t.Error(err)
			}
		}
	})
	rate := func(a, b usage) string {
		d := b.at.Sub(a.at).Seconds()
		return fmt.Sprintf("CPU %.3f cores, NATS msgs in/out %.0f/%.0f per s", (b.cpu-a.cpu).Seconds()/d,
			float64(b.inMsgs-a.inMsgs)/d, float64(b.outMs-a.outMs)/d)
	}
	time.Sleep(2 * time.Second)
	u0 := sample(ns)
	time.Sleep(window)
	u1 := sample(ns)
	t.Logf("%d shops, a change each per %v, no mirror: %s, heap %d KiB, RSS %d KiB", n, every, rate(u0, u1), u1.heap>>10, u1.rss>>10)

	ms := make([]*mirror.Mirror, n)
	for i, shop := range shops {
		ms[i] = standby(t, js, ckv, dumps, shop)
		m := ms[i]
		wg.Go(func() { _ = m.Run(ctx) })
	}
	waitFor(t, "every mirror caught up", time.Minute, func() bool {
		for _, m := range ms {
			if !m.CaughtUp(2 * time.Second) {
				return false
			}
		}
		return true
	})
	u2 := sample(ns)
	time.Sleep(window)
	u3 := sample(ns)
	t.Logf("%d shops with a warm mirror each: %s, heap %d KiB, RSS %d KiB", n, rate(u2, u3), u3.heap>>10, u3.rss>>10)
	d0, d1 := u1.at.Sub(u0.at).Seconds(), u3.at.Sub(u2.at).Seconds()
	t.Logf("per mirrored shop: CPU %.3f %% of a core, heap %.0f KiB, RSS %.0f KiB, NATS msgs %.1f in / %.1f out per s",
		100*((u3.cpu-u2.cpu).Seconds()/d1-(u1.cpu-u0.cpu).Seconds()/d0)/float64(n),
		float64(int64(u3.heap)-int64(u1.heap))/1024/float64(n), float64(int64(u3.rss)-int64(u1.rss))/1024/float64(n),
		(float64(u3.inMsgs-u2.inMsgs)/d1-float64(u1.inMsgs-u0.inMsgs)/d0)/float64(n),
		(float64(u3.outMs-u2.outMs)/d1-float64(u1.outMs-u0.outMs)/d0)/float64(n))
}
