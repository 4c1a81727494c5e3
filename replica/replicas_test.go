//go:build !race

// The in-process NATS cluster (nats-server v2.15.2) races with itself under
// the race detector once a clustered stream takes messages
// (jetstream_batching.go:493 against jetstream_cluster.go:6083): this test
// runs without -race (go test ./replica).

package replica_test

import (
	"context"
	"testing"

	"github.com/orderwatch/orderwatch/internal/testnats"
)

// TestBucketsFollowTheStreamReplicas: on a NATS cluster the lease, the
// checkpoint and the snapshot buckets get the stream's replicas (no node
// holding them alone is a single point of failure for the group).
func TestBucketsFollowTheStreamReplicas(t *testing.T) {
	g := newGroupOn(t, testnats.Cluster(t, 3), 3)
	a := g.start("a", &pipeline{})
	waitFor(t, "a active", a.working)
	for _, name := range []string{"KV_test_lease", "KV_test_checkpoint", "OBJ_test_snapshot"} {
		s, err := g.js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Replicas; got != 3 {
			t.Errorf("%s has %d replicas, want the stream's 3", name, got)
		}
	}
}
