package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plenty"
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
	start := func(instance string) *replicaRun {
		cfg := testConfig(t, "http://127.0.0.1:1", nats)
		cfg.LeaseTTL = time.Minute
		r := runReplica(t, cfg, instance)
		if r.w.host.Buckets() == nil {
			t.Fatalf("%s: the host bound no buckets", instance)
		}
		return r
	}
	a := start("a")
	testnats.WaitFor(t, "a active", 60*time.Second, a.w.Working)
	b := start("b")
	// b's first attempt made (its replica reads the holder after it):
	testnats.WaitFor(t, "b a standby", 60*time.Second, func() bool { return b.w.rep.Report().Holder == "a" })
	a.stop()
	<-a.done // released
	testnats.WaitFor(t, "b active after a released the lease", 60*time.Second, b.w.Working)
}

// TestOneLimitsWatchPerProcess: a process running several shops watches
// the groups' limits keys once (the host's feed), not once per active
// shop (a consumer each on the checkpoint bucket's stream: at 1,000 shops
// the stream's consumer limit refused every further watch), and a wait
// another replica writes to shop k's limits still reaches shop k's
// running client, and no other shop's.
func TestOneLimitsWatchPerProcess(t *testing.T) {
	url := testnats.Start(t).ClientURL()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	h, err := NewHost(HostConfig{Conn: nc, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	const shops, k = 4, 2
	ws, stops := make([]*Watcher, shops), make([]func(), shops)
	for i := range ws {
		cfg := testConfig(t, fmt.Sprintf("http://127.0.0.1:%d", i+1), url)
		cfg.Stream, cfg.SubjectPrefix, cfg.HTTPAddr = fmt.Sprintf("ORDERS%d", i), fmt.Sprintf("orders%d", i), ""
		cfg.Lease, cfg.InstanceID = true, "a"
		w, err := New(cfg, Options{Logger: quiet(), Host: h, Replica: replica.Tuning{Tick: 50 * time.Millisecond, Retry: 50 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = w.Run(ctx) }()
		stops[i] = func() { cancel(); <-done }
		t.Cleanup(stops[i])
		ws[i] = w
	}
	for i, w := range ws {
		testnats.WaitFor(t, fmt.Sprintf("shop %d active", i), 30*time.Second, w.Working)
	}
	now := time.Now()
	why := "429 answered to x late"
	wait := plenty.Wait{Until: now.Add(10 * time.Minute), Reason: plenty.WaitThrottled, Why: why, Measured: now, Announced: 10 * time.Minute}
	waits, _ := json.Marshal(map[string]any{"waits": []plenty.Wait{wait}})
	v, _ := json.Marshal(map[string]any{"writer": lease.Writer{Instance: "x", Nonce: "x"}, "written": now.UTC(),
		"records": map[string]json.RawMessage{plenty.WaitsRecord: waits}})
	js := testnats.JetStream(t, url)
	kv, err := js.KeyValue(context.Background(), "orderwatch_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), ws[k].rep.Key()+".limits", v); err != nil {
		t.Fatal(err)
	}
	pending := func(w *Watcher) bool { p, ok := w.cl().Pacer().Pending(); return ok && p.Why == why }
	testnats.WaitFor(t, "x's wait binding shop k's running client", 60*time.Second, func() bool { return pending(ws[k]) })
	for i, w := range ws {
		if i != k && pending(w) {
			t.Errorf("shop %d's client is bound by the wait x wrote to shop %d's limits", i, k)
		}
	}
	s, err := js.Stream(context.Background(), "KV_orderwatch_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Consumers; n != 1 {
		t.Errorf("%d consumers on the checkpoint bucket's stream with %d active shops in one process, want 1 (one watch of the limits keys per process)", n, shops)
	}
	// A replica follows while it is active: a stopped one no more.
	if n := h.LimitsFeed().Following(); n != shops {
		t.Errorf("%d replicas follow their limits through the host's feed, want %d", n, shops)
	}
	stops[0]()
	if n := h.LimitsFeed().Following(); n != shops-1 {
		t.Errorf("%d replicas follow their limits after one stopped, want %d", n, shops-1)
	}
}
