package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/replica"
)

// TestLimitsFeedReopensAndDispatchesByKey: the process's one watch of the
// limits keys is refused while the checkpoint bucket's stream has no
// consumer left (the server's limit per stream): the feed tries again and,
// once a consumer is free, hands each entry to the replica following its
// key, the replicas registered before still registered; one that stopped
// following is handed nothing more.
func TestLimitsFeedReopensAndDispatchesByKey(t *testing.T) {
	t.Parallel()
	url := testnats.StartWith(t, func(o *server.Options) { o.JetStreamLimits.DefaultMaxConsumers = 1 }).ClientURL()
	js := testnats.JetStream(t, url)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "feed_checkpoint"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, "KV_feed_checkpoint", jetstream.ConsumerConfig{Durable: "blocker"}); err != nil {
		t.Fatal(err)
	}
	f := replica.NewLimitsFeed(kv, 20*time.Millisecond)
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.Run(fctx) }()
	t.Cleanup(func() { cancel(); <-done })

	got := map[string]chan string{"s1.o.limits": make(chan string, 100), "s2.o.limits": make(chan string, 100)}
	stop := map[string]func(){}
	for key, ch := range got {
		stop[key] = replica.FollowLimitsFeed(f, key, func(e jetstream.KeyValueEntry) { ch <- string(e.Value()) })
	}
	if err := js.DeleteConsumer(ctx, "KV_feed_checkpoint", "blocker"); err != nil {
		t.Fatal(err)
	}
	// The feed watches changes from when its watch opens: written until
	// one arrives.
	testnats.WaitFor(t, "s1's limits handed to s1's follower once the feed's watch opened", 20*time.Second, func() bool {
		if _, err := kv.Put(ctx, "s1.o.limits", []byte("s1")); err != nil {
			t.Fatal(err)
		}
		select {
		case v := <-got["s1.o.limits"]:
			return v == "s1"
		case <-time.After(100 * time.Millisecond):
			return false
		}
	})
	if len(got["s2.o.limits"]) > 0 {
		t.Errorf("s2's follower was handed %q, written to s1's limits", <-got["s2.o.limits"])
	}
	stop["s1.o.limits"]()
	if n := f.Following(); n != 1 {
		t.Errorf("%d following after s1 stopped, want 1", n)
	}
	for len(got["s1.o.limits"]) > 0 {
		<-got["s1.o.limits"]
	}
	if _, err := kv.Put(ctx, "s1.o.limits", []byte("s1 again")); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "s2.o.limits", []byte("s2")); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "s3.o", []byte("a checkpoint")); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-got["s2.o.limits"]:
		if v != "s2" {
			t.Errorf("s2's follower was handed %q, want s2", v)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("s2's limits not handed to s2's follower")
	}
	// Handed in the order written: s1's second value came before s2's.
	if len(got["s1.o.limits"]) > 0 {
		t.Errorf("s1's follower was handed %q after it stopped following", <-got["s1.o.limits"])
	}
	stop["s2.o.limits"]()
}
