package pipeline

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plentysim"
)

// TestUnleasedBesideAGroupMakesNoCall: a watcher with WATCHER_LEASE=false
// beside a hot-standby group of the same shop and stream (its lease held
// by a replica) makes no call to the shop, is not ready and names the
// holder; once nobody holds the lease it calls the shop.
func TestUnleasedBesideAGroupMakesNoCall(t *testing.T) {
	sim := plentysim.New(plentysim.Config{Seed: 1})
	sim.Generate(5, time.Now().Add(-time.Hour), time.Now().Add(-time.Minute))
	srv := httptest.NewServer(sim)
	defer srv.Close()
	natsURL := testnats.Start(t).ClientURL()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	kv, _, err := lease.Bucket(ctx, js, "orderwatch_lease", 9*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	key := lease.Key(srv.URL, "ORDERS")
	held, _ := json.Marshal(lease.Value{Instance: "r1", Host: "pod-0", Nonce: "n1", Since: time.Now()})
	if _, err := kv.Put(ctx, key, held); err != nil { // r1 of the group holds it (for 9 s)
		t.Fatal(err)
	}
	// and renews it, as a holder does: on a loaded machine the watcher
	// may start late, and the no-call window below must not outlast the
	// key.
	renewCtx, stopRenewing := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-time.After(time.Second):
				_, _ = kv.Put(renewCtx, key, held)
			}
		}
	}()
	defer stopRenewing()

	cfg := testConfig(t, srv.URL, natsURL)
	cfg.Lease = false
	w, err := New(cfg, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(rctx) }()
	defer func() { cancel(); <-done }()

	var why string
	testnats.WaitFor(t, "the watcher to say it does not call the shop", 30*time.Second, func() bool {
		var ok bool
		ok, why = Ready(w.status())
		return !ok && strings.Contains(why, "held by the replica r1 (host pod-0)")
	})
	// Three sweep intervals (1 s) with the lease held: no call.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if n := sim.Stats().Calls; n != 0 {
			t.Fatalf("the watcher without the lease made %d calls beside the group's active replica", n)
		}
	}
	stopRenewing()
	<-renewed
	if err := kv.Delete(ctx, key); err != nil { // the group stops
		t.Fatal(err)
	}
	testnats.WaitFor(t, "a call once nobody holds the lease", 30*time.Second, func() bool { return sim.Stats().Calls > 0 })
	t.Logf("readiness while the group's lease was held: %s", why)
}
