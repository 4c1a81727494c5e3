package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
)

// failingStatus is a bucket whose status requests fail while failing is
// set (a server that times them out), under the handle's sharing.
type failingStatus struct {
	jetstream.KeyValue
	failing atomic.Bool
	failed  atomic.Int32
}

func (f *failingStatus) Status(ctx context.Context) (jetstream.KeyValueStatus, error) {
	if f.failing.Load() {
		f.failed.Add(1)
		return nil, errors.New("stream info: timeout (injected)")
	}
	return f.KeyValue.Status(ctx)
}

// TestFailedSharedStatusReadDelaysTheLeasesByARecheck: the leases of a
// fleet member share one handle of the lease bucket, and so one read of
// its status (statuses): after another member died, the leases it
// acquires at once all wait for the same read, and when that read fails
// each of them is unsure whether the bucket was created again (hold).
// That holds every one of them back (a lease must not be active in a
// bucket created again before the old holders' deadlines), but only
// until the next read answers (recheck, every 500 ms at most), not for a
// TTL: the clock stands still here, so a TTL never passes. No lease is
// given up (each is announced once, never demoted), and a lease already
// active, which reads no status, is not touched.
func TestFailedSharedStatusReadDelaysTheLeasesByARecheck(t *testing.T) {
	s := testnats.StartAny(t)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	kv, ttl, err := Bucket(context.Background(), js, "test_lease", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h := kv.(healingKV)
	inner := &failingStatus{KeyValue: h.KeyValue}
	shared := healingKV{KeyValue: inner, k: h.k} // the member's one handle, its reads shared

	type held struct {
		*Lease
		up, down atomic.Int32
	}
	run := func(i int) *held {
		c := &held{}
		c.Lease = New(shared, ttl, Config{Key: fmt.Sprintf("shop%d.ORDERS", i), Instance: "m", Host: "h", NoWatch: true,
			Renew: 200 * time.Millisecond, Mono: func() time.Duration { return time.Hour },
			OnChange: func(active bool) {
				if active {
					c.up.Add(1)
				} else {
					c.down.Add(1)
				}
			}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = c.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return c
	}
	before := run(0)
	testnats.WaitFor(t, "the lease held before the failure active", 10*time.Second, before.Active)

	inner.failing.Store(true)
	const n = 24
	var leases []*held
	for i := 1; i <= n; i++ {
		leases = append(leases, run(i))
	}
	unsure := func(l *held) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.active && l.unsure
	}
	testnats.WaitFor(t, "every lease written and unsure of the bucket", 10*time.Second, func() bool {
		for _, l := range leases {
			if !unsure(l) {
				return false
			}
		}
		return true
	})
	for _, l := range leases {
		if l.Active() || l.up.Load() != 0 {
			t.Fatalf("%s active while the bucket's status could not be read", l.cfg.Key)
		}
	}
	if !before.Active() {
		t.Error("the lease active before the failure is not active any more")
	}

	inner.failing.Store(false) // the error was transient: the next read answers
	testnats.WaitFor(t, "every lease active once a read answered, without a TTL passing", 10*time.Second, func() bool {
		for _, l := range leases {
			if !l.Active() {
				return false
			}
		}
		return true
	})
	for _, l := range append(leases, before) {
		if up, down := l.up.Load(), l.down.Load(); up != 1 || down != 0 {
			t.Errorf("%s: announced active %d times, demoted %d times; want once, never", l.cfg.Key, up, down)
		}
		if v, found, err := l.Holder(context.Background()); err != nil || !found || !l.Mine(v) {
			t.Errorf("%s: the key holds %+v (found %v, %v); want this lease's", l.cfg.Key, v, found, err)
		}
	}
	if inner.failed.Load() == 0 {
		t.Error("no status read failed: the test proved nothing")
	}
}
