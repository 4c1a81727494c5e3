package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/replica"
)

// TestSingleShopIsAFleetOfOne: a single shop's pipelines run on the path
// of a fleet's: their host binds the hot standby's buckets (BindBuckets)
// and its one watch of the lease bucket wakes a standby's lease when the
// active releases it (the lease watches no key of its own). With a lease
// TTL of 60 s a standby would otherwise try again only after a renewal
// interval, 20 s: it takes over well before.
func TestSingleShopIsAFleetOfOne(t *testing.T) {
	nats := testnats.Start(t).ClientURL()
	type run struct {
		w    *Watcher
		stop context.CancelFunc
		done chan struct{}
	}
	start := func(instance string) *run {
		cfg := testConfig(t, "http://127.0.0.1:1", nats)
		cfg.Lease, cfg.LeaseTTL, cfg.InstanceID = true, time.Minute, instance
		w, err := New(cfg, Options{Logger: quiet(), Replica: replica.Tuning{Tick: 50 * time.Millisecond, Retry: 50 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		if w.host.Buckets() == nil {
			t.Fatalf("%s: the host bound no buckets", instance)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &run{w: w, stop: cancel, done: make(chan struct{})}
		go func() { defer close(r.done); _ = w.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	a := start("a")
	testnats.WaitFor(t, "a active", 15*time.Second, a.w.Working)
	b := start("b")
	// b's first attempt made (its replica reads the holder after it):
	testnats.WaitFor(t, "b a standby", 15*time.Second, func() bool { return b.w.rep.Report().Holder == "a" })
	a.stop()
	<-a.done // released
	testnats.WaitFor(t, "b active after a released the lease", 10*time.Second, b.w.Working)
}
