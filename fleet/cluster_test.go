package fleet

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/shops"
)

// onCluster moves a world onto a JetStream cluster of three in-process
// servers (its own single server stays unused): the world's reader and
// every member started with startReplicated list all three client URLs.
func (w *world) onCluster() *testnats.JSCluster {
	w.t.Helper()
	c := testnats.StartCluster(w.t, 3)
	w.natsURL = c.URLs()
	nc := connect(w.t, w.natsURL)
	w.t.Cleanup(nc.Close)
	w.js, _ = jetstream.New(nc)
	return c
}

// startReplicated starts a member as watcher run would on a NATS
// cluster: its connection made by publisher.Connect (unlimited
// reconnects, 2 s ± 1 s apart, to any of the URLs), the stream and the
// buckets created with `replicas` replicas (WATCHER_STREAM_REPLICAS,
// WATCHER_LEASE_REPLICAS).
func (w *world) startReplicated(name string, replicas int) *member {
	w.t.Helper()
	b := base(w.natsURL)
	b.StreamReplicas, b.LeaseReplicas = replicas, replicas
	nc, err := publisher.Connect(b.NATS("orderwatch-" + name))
	if err != nil {
		w.t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	f, err := New(Config{NC: nc, Instance: name, Host: "test", Base: b, StateDir: filepath.Join(w.t.TempDir(), name),
		Getenv: func(k string) string { return map[string]string{"SHOP_PW": "demo"}[k] },
		Logger: testLogger(name), Registerer: reg, Gatherer: reg, Version: "test"})
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, f: f, nc: nc, cancel: cancel, done: make(chan struct{})}
	watcher := shops.NewWatcher(w.registry, f.RegistryOptions(nil))
	var loops sync.WaitGroup
	loops.Go(func() { watcher.Run(ctx, f.Apply) })
	loops.Go(func() { _ = f.Run(ctx) })
	go func() { loops.Wait(); nc.Close(); close(m.done) }()
	w.t.Cleanup(func() { m.cancel(); <-m.done })
	return m
}

// holders maps each shop to the member running it.
func holders(ms []*member) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for _, id := range m.active() {
			out[id] = m.name
		}
	}
	return out
}

// leaderWithMember moves the leadership of a stream (ORDERS, or a
// bucket's: KV_orderwatch_lease), a step-down at a time, until it is on a
// server some member is connected to, and returns that server's name and
// the members on it.
func leaderWithMember(t *testing.T, w *world, ms []*member, stream string) (string, []string) {
	t.Helper()
	var leader string
	var on []string
	testnats.WaitForEvery(t, stream+"'s leader on a server a member is connected to", 60*time.Second, 500*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := w.js.Stream(ctx, stream)
		if err != nil || s.CachedInfo().Cluster == nil || s.CachedInfo().Cluster.Leader == "" {
			return false
		}
		leader, on = s.CachedInfo().Cluster.Leader, nil
		for _, m := range ms {
			if m.nc.ConnectedServerName() == leader {
				on = append(on, m.name)
			}
		}
		if len(on) > 0 {
			return true
		}
		_, _ = w.js.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil, 5*time.Second)
		return false
	})
	return leader, on
}

// readable says whether a consumer can be created on the stream within
// 2 s (the test's reader, w.events, fails on a stream that cannot answer
// yet while the cluster elects its leader).
func readable(js jetstream.JetStream) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		return false
	}
	cons, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute})
	if err != nil {
		return false
	}
	_ = s.DeleteConsumer(ctx, cons.CachedInfo().Name)
	return true
}

// checkReplicas fails the test unless the stream and every bucket of the
// fleet (the KV buckets' and the object store's streams) have `want`
// replicas.
func checkReplicas(t *testing.T, js jetstream.JetStream, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{"ORDERS", "KV_orderwatch_lease", "KV_orderwatch_checkpoint", "KV_orderwatch_fleet", "OBJ_orderwatch_snapshot"} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Errorf("stream %s: %v", name, err)
			continue
		}
		if got := s.CachedInfo().Config.Replicas; got != want {
			t.Errorf("stream %s has %d replicas; want %d", name, got, want)
		}
	}
}

// TestFleetOnNATSCluster: three members share six shops on a JetStream
// cluster of three servers, the stream and the buckets at three replicas.
// A server with a member connected to it is shut down while changes are
// made: the one leading the stream, or the one leading the lease bucket.
// The members on it reconnect to the others, the stream or the bucket
// elects another leader, leases keep or move, and the stream holds
// exactly one event per change made (before, during and after), no shop
// ever called by two members at once.
func TestFleetOnNATSCluster(t *testing.T) {
	if os.Getenv("FLEET_CLUSTER") == "" {
		t.Skip("FLEET_CLUSTER=1 runs it (a cluster of three servers and three members, twice: about 40 s)")
	}
	t.Run("stream leader", func(t *testing.T) { nodeDown(t, "ORDERS") })
	t.Run("lease bucket leader", func(t *testing.T) { nodeDown(t, "KV_orderwatch_lease") })
}

// nodeDown is TestFleetOnNATSCluster with the server leading `stream`
// shut down.
func nodeDown(t *testing.T, stream string) {
	const n = 6
	w := newWorld(t, n)
	c := w.onCluster()
	ms := []*member{w.startReplicated("m0", 3), w.startReplicated("m1", 3), w.startReplicated("m2", 3)}
	waitStable(t, ms, n, 90*time.Second)
	checkReplicas(t, w.js, 3)
	quietAt := time.Now()
	want := w.mutate(0)
	w.waitEvents(want, 30*time.Second)
	quiet := time.Since(quietAt)

	leader, on := leaderWithMember(t, w, ms, stream)
	meta := c.MetaLeader() == c.ServerNamed(leader)
	before := holders(ms)
	downAt := time.Now()
	c.ServerNamed(leader).Shutdown()
	want = append(want, w.mutate(1)...) // while the server is going
	testnats.WaitFor(t, "every member connected to a server still up", 60*time.Second, func() bool {
		for _, m := range ms {
			if !m.nc.IsConnected() || m.nc.ConnectedServerName() == leader {
				return false
			}
		}
		return true
	})
	reconnected := time.Since(downAt)
	testnats.WaitForEvery(t, "the stream readable", 60*time.Second, 100*time.Millisecond, func() bool { return readable(w.js) })
	answers := time.Since(downAt)
	w.waitEvents(want, 60*time.Second)
	published := time.Since(downAt)
	waitStable(t, ms, n, 90*time.Second)
	stableAt := time.Since(downAt)

	after := holders(ms)
	var moved []string
	for id, h := range before {
		if after[id] != h {
			moved = append(moved, id+" "+h+"->"+after[id])
		}
	}
	slices.Sort(moved)
	want = append(want, w.mutate(2)...)
	w.waitEvents(want, 30*time.Second)
	checkReplicas(t, w.js, 3)
	for id, cs := range w.callsSince(time.Time{}) {
		tenures(t, id, cs)
	}
	var reconnects []uint64
	for _, m := range ms {
		reconnects = append(reconnects, m.nc.Stats().Reconnects)
	}
	t.Logf("server %s (leading %s; meta leader %v; members %v on it) shut down: every member on another server after %v (reconnects per member %v); the stream answers a consumer's creation after %v; the changes made meanwhile on the stream, exactly, after %v (with all servers up: %v); fleet stable after %v; shops moved: %v",
		leader, stream, meta, on, reconnected.Round(time.Millisecond), reconnects, answers.Round(time.Millisecond), published.Round(time.Millisecond), quiet.Round(time.Millisecond), stableAt.Round(time.Millisecond), moved)
}
