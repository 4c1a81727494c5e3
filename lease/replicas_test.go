package lease_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
)

// The buckets the watcher creates have the replicas asked for (the
// stream's), and an existing bucket with one replica is changed to them.
func TestBucketReplicas(t *testing.T) {
	js := jsOf(t, testnats.Cluster(t, 3))
	ctx := context.Background()
	replicas := func(stream string) int {
		t.Helper()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.Replicas
	}
	if _, _, err := lease.Bucket(ctx, js, "l", testTTL, lease.Replicas(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.CheckpointBucket(ctx, js, "c", lease.Replicas(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.ObjectStore(ctx, js, jetstream.ObjectStoreConfig{Bucket: "o"}, lease.Replicas(3)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"KV_l", "KV_c", "OBJ_o"} {
		if got := replicas(s); got != 3 {
			t.Errorf("%s created with %d replicas, want 3", s, got)
		}
	}
	// Created with one replica by an earlier version, then asked for three.
	if _, err := lease.CheckpointBucket(ctx, js, "old"); err != nil {
		t.Fatal(err)
	}
	if got := replicas("KV_old"); got != 1 {
		t.Fatalf("precondition: KV_old has %d replicas, want 1", got)
	}
	if _, err := lease.CheckpointBucket(ctx, js, "old", lease.Replicas(3)); err != nil {
		t.Fatal(err)
	}
	if got := replicas("KV_old"); got != 3 {
		t.Errorf("KV_old has %d replicas after asking for 3, want 3", got)
	}
}
