package lease_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
)

const testTTL = 2 * time.Second

func runServer(t *testing.T) testnats.Server { return testnats.StartAny(t) }

func bucket(t *testing.T, s testnats.Server) (jetstream.KeyValue, time.Duration) {
	kv, ttl, _ := conn(t, s)
	return kv, ttl
}

// conn is a connection of its own (one per process) and the lease bucket on it.
func conn(t *testing.T, s testnats.Server) (jetstream.KeyValue, time.Duration, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	kv, ttl, err := lease.Bucket(context.Background(), js, "test_lease", testTTL)
	if err != nil {
		t.Fatal(err)
	}
	return kv, ttl, nc
}

// contender is a Lease run in the background, with its changes recorded.
type contender struct {
	*lease.Lease
	changes atomic.Int32
	stop    context.CancelFunc
	done    chan struct{}
}

func start(t *testing.T, kv jetstream.KeyValue, ttl time.Duration, cfg lease.Config) *contender {
	t.Helper()
	c := &contender{done: make(chan struct{})}
	if cfg.Key == "" {
		cfg.Key = lease.Key("https://shop.example/", "ORDERS")
	}
	cfg.OnChange = func(bool) { c.changes.Add(1) }
	c.Lease = lease.New(kv, ttl, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	go func() { defer close(c.done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-c.done })
	return c
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	testnats.WaitFor(t, what, limit, cond)
}

// never fails the test when both contenders are active at once, sampled
// until stop is closed.
func never(t *testing.T, a, b *contender, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if a.Active() && b.Active() {
			t.Error("both contenders active at once")
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func TestKey(t *testing.T) {
	for _, c := range []struct{ shop, stream, want string }{
		{"https://shop.example/", "ORDERS", "shop_example.ORDERS"},
		{"http://127.0.0.1:8080/rest", "ORDERS", "127_0_0_1_8080_rest.ORDERS"},
		{"", "", "_._"},
	} {
		if got := lease.Key(c.shop, c.stream); got != c.want {
			t.Errorf("Key(%q, %q) = %q, want %q", c.shop, c.stream, got, c.want)
		}
	}
}

func TestExclusiveAndRenewed(t *testing.T) {
	for _, sameID := range []bool{false, true} {
		name := map[bool]string{false: "distinct ids", true: "same id"}[sameID]
		t.Run(name, func(t *testing.T) {
			kv, ttl := bucket(t, runServer(t))
			idB := "b"
			if sameID {
				idB = "a"
			}
			a := start(t, kv, ttl, lease.Config{Instance: "a", Host: "h", File: "fa"})
			b := start(t, kv, ttl, lease.Config{Instance: idB, Host: "h", File: "fb"})
			waitFor(t, "one contender to be active", 5*time.Second, func() bool { return a.Active() || b.Active() })
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go never(t, a, b, stop, &wg)
			holder := a
			if b.Active() {
				holder = b
			}
			// Held across several TTLs: renewed, never both.
			end := time.Now().Add(2 * ttl)
			waitFor(t, "two TTLs to pass", 3*ttl, func() bool { return time.Now().After(end) })
			close(stop)
			wg.Wait()
			if !holder.Active() || holder.changes.Load() != 1 {
				t.Errorf("the holder lost the lease (changes %d) although it renewed it", holder.changes.Load())
			}
			v, found, err := holder.Holder(context.Background())
			if err != nil || !found || !holder.Mine(v) {
				t.Errorf("holder value %+v found %v err %v; want this process's", v, found, err)
			}
		})
	}
}

func TestExpiryTakeover(t *testing.T) {
	s := runServer(t)
	kvA, ttl, ncA := conn(t, s)
	a := start(t, kvA, ttl, lease.Config{Instance: "a", Host: "h"})
	waitFor(t, "a active", 5*time.Second, a.Active)
	kvB, _, _ := conn(t, s)
	b := start(t, kvB, ttl, lease.Config{Instance: "b", Host: "h"})
	// kill -9: a's connection goes with its loop, no release. The key
	// expires on the server; b takes over then.
	kill(ncA, a)
	waitFor(t, "b to take over after expiry", 3*ttl, b.Active)
}

// kill ends a process's connection and then its loop: no release arrives.
func kill(nc *nats.Conn, a *contender) {
	nc.Close()
	a.stop()
	<-a.done
}

func TestReleaseHandover(t *testing.T) {
	kv, ttl := bucket(t, runServer(t))
	a := start(t, kv, ttl, lease.Config{Instance: "a", Host: "h"})
	waitFor(t, "a active", 5*time.Second, a.Active)
	b := start(t, kv, ttl, lease.Config{Instance: "b", Host: "h", Renew: time.Hour}) // only the watch can wake it
	a.stop()
	<-a.done
	if a.Active() {
		t.Error("a still active after its release")
	}
	waitFor(t, "b to take over on the release (only the watch can wake it)", 10*time.Second, b.Active)
}

func TestOwnStaleLeaseTakenAtOnce(t *testing.T) {
	s := runServer(t)
	kvA, ttl, ncA := conn(t, s)
	a := start(t, kvA, ttl, lease.Config{Instance: "a", Host: "h", File: "f1", Lock: "1:10"})
	waitFor(t, "a active", 5*time.Second, a.Active)
	kill(ncA, a)
	kv, _ := bucket(t, s)
	// Same instance and host, another state file: must wait for expiry.
	other := start(t, kv, ttl, lease.Config{Instance: "a", Host: "h", File: "f2", Lock: "1:11", Renew: 100 * time.Millisecond})
	// A copy of the file (same id, another file): must wait for expiry.
	copied := start(t, kv, ttl, lease.Config{Instance: "a", Host: "h", File: "f1", Lock: "1:12", Renew: 100 * time.Millisecond})
	// The restarted process on the same file takes it over at once.
	again := start(t, kv, ttl, lease.Config{Instance: "a", Host: "h", File: "f1", Lock: "1:10", Renew: time.Hour})
	waitFor(t, "the restarted process to hold the lease (its first attempt; the next is an hour away)", 10*time.Second, again.Active)
	if other.Active() {
		t.Error("a process on another state file took the lease")
	}
	if copied.Active() {
		t.Error("a process on a copy of the state file took the lease")
	}
}

// TestCopyOfStateFileWaitsForExpiry: a process on a copy of the holder's
// state file (same instance, host and file id; another file) does not
// take the live lease while the holder renews it.
func TestCopyOfStateFileWaitsForExpiry(t *testing.T) {
	s := runServer(t)
	kvA, ttl, _ := conn(t, s)
	a := start(t, kvA, ttl, lease.Config{Instance: "a", Host: "h", File: "f1", Lock: "1:10", Renew: 200 * time.Millisecond})
	waitFor(t, "a active", 5*time.Second, a.Active)
	kv, _ := bucket(t, s)
	copied := start(t, kv, ttl, lease.Config{Instance: "a", Host: "h", File: "f1", Lock: "1:12", Renew: 100 * time.Millisecond})
	<-copied.Decided()
	deadline := time.Now().Add(3 * ttl) // some 60 attempts of the copy
	for time.Now().Before(deadline) {
		if copied.Active() {
			t.Fatal("a process on a copy of the state file took the live lease")
		}
		time.Sleep(50 * time.Millisecond) // sampling, not waiting for a condition
	}
	if !a.Active() {
		t.Error("the holder lost its lease to a copy of its state file")
	}
}

func TestDemotedOnRevisionMismatch(t *testing.T) {
	kv, ttl := bucket(t, runServer(t))
	a := start(t, kv, ttl, lease.Config{Instance: "a", Host: "h", Renew: 100 * time.Millisecond})
	waitFor(t, "a active", 5*time.Second, a.Active)
	// Someone else's write (an operator, a split brain): a's next renewal
	// finds another revision and demotes it at once.
	key := lease.Key("https://shop.example/", "ORDERS")
	if _, err := kv.Put(context.Background(), key, []byte(`{"instance":"x","nonce":"x"}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to step down", ttl, func() bool { return !a.Active() && a.changes.Load() == 2 })
	if err := a.Gate(); !errors.Is(err, lease.ErrNotActive) {
		t.Errorf("Gate = %v, want ErrNotActive", err)
	}
}

// A paused process (SIGSTOP, a long GC, a partition) that wakes after its
// deadline fails Gate before anything else happens: no network round trip.
func TestFencedAfterPause(t *testing.T) {
	s := runServer(t)
	kv, ttl := bucket(t, s)
	var mono atomic.Int64
	cfg := lease.Config{Key: "k", Instance: "a", Host: "h", Mono: func() time.Duration { return time.Duration(mono.Load()) }}
	l := lease.New(kv, ttl, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "active", 5*time.Second, l.Active)
	if err := l.Gate(); err != nil {
		t.Fatalf("Gate = %v while active", err)
	}
	// The server goes away (partition) and the process "sleeps" past its
	// deadline on its monotonic clock.
	s.Shutdown()
	s.WaitForShutdown()
	mono.Add(int64(ttl))
	if err := l.Gate(); !errors.Is(err, lease.ErrNotActive) {
		t.Errorf("Gate = %v after the deadline, want ErrNotActive", err)
	}
	if !l.Deadline().IsZero() && time.Until(l.Deadline()) > 0 {
		t.Errorf("deadline %v still ahead after the pause", l.Deadline())
	}
}

func TestCheckpointOnlyByTheHolder(t *testing.T) {
	kv, ttl, ckv, key := checkpointSetup(t)
	a := start(t, kv, ttl, lease.Config{Instance: "a", Host: "h"})
	b := start(t, kv, ttl, lease.Config{Instance: "b", Host: "h"})
	waitFor(t, "one active", 5*time.Second, func() bool { return a.Active() || b.Active() })
	holder, other := a, b
	if b.Active() {
		holder, other = b, a
	}
	ctx := context.Background()
	if err := lease.NewCheckpoints(ckv, key).Write(ctx, other.Lease, 1, "x"); !errors.Is(err, lease.ErrNotActive) {
		t.Errorf("a standby's checkpoint write: %v, want ErrNotActive", err)
	}
	w := lease.NewCheckpoints(ckv, key)
	for seq := uint64(1); seq <= 3; seq++ {
		if err := w.Write(ctx, holder.Lease, seq, map[string]uint64{"n": seq}); err != nil {
			t.Fatal(err)
		}
	}
	cp, found, err := lease.NewCheckpoints(ckv, key).Read(ctx)
	if err != nil || !found || cp.Seq != 3 || cp.Epoch != holder.Epoch() || cp.Nonce != holder.Nonce() || string(cp.State) != `{"n":3}` {
		t.Errorf("Read = %+v %v %v", cp, found, err)
	}
	// A successor's writer supersedes an older revision.
	if err := lease.NewCheckpoints(ckv, key).Write(ctx, holder.Lease, 4, "y"); err != nil {
		t.Errorf("a second writer of the same tenure: %v", err)
	}
}

// gets counts the reads of a KeyValue.
type gets struct {
	jetstream.KeyValue
	n atomic.Int32
}

func (g *gets) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	g.n.Add(1)
	return g.KeyValue.Get(ctx, key)
}

// TestCheckpointReadOnceInAMemo: within Memo the checkpoint is read from
// NATS once however often Read is called (a takeover read it three
// times); a write, or the end of the memo, reads it again.
func TestCheckpointReadOnceInAMemo(t *testing.T) {
	kv, ttl, ckv, key := checkpointSetup(t)
	a := start(t, kv, ttl, lease.Config{Instance: "a", Host: "h"})
	waitFor(t, "a active", 5*time.Second, a.Active)
	ctx := context.Background()
	if err := lease.NewCheckpoints(ckv, key).Write(ctx, a.Lease, 1, "x"); err != nil {
		t.Fatal(err)
	}
	g := &gets{KeyValue: ckv}
	c := lease.NewCheckpoints(g, key)
	end := c.Memo()
	for range 3 {
		if cp, found, err := c.Read(ctx); err != nil || !found || cp.Seq != 1 {
			t.Fatalf("Read = %+v %v %v", cp, found, err)
		}
	}
	if n := g.n.Load(); n != 1 {
		t.Errorf("three reads in a memo: %d gets, want 1", n)
	}
	if err := c.Write(ctx, a.Lease, 2, "y"); err != nil {
		t.Fatal(err)
	}
	if cp, _, _ := c.Read(ctx); cp.Seq != 2 {
		t.Errorf("a read after a write: seq %d, want 2", cp.Seq)
	}
	end()
	before := g.n.Load()
	_, _, _ = c.Read(ctx)
	_, _, _ = c.Read(ctx)
	if n := g.n.Load() - before; n != 2 {
		t.Errorf("two reads after the memo: %d gets, want 2", n)
	}
}

// checkpointSetup is a server with the lease bucket, the checkpoint bucket
// (on a connection of its own) and a group's key.
func checkpointSetup(t *testing.T) (kv jetstream.KeyValue, ttl time.Duration, ckv jetstream.KeyValue, key string) {
	t.Helper()
	s := runServer(t)
	kv, ttl = bucket(t, s)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	if ckv, err = lease.CheckpointBucket(context.Background(), js, "test_checkpoint"); err != nil {
		t.Fatal(err)
	}
	return kv, ttl, ckv, lease.Key("https://shop.example/", "ORDERS")
}
